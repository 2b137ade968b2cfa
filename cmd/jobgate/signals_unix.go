//go:build unix

package main

import (
	"os"
	"syscall"
)

// drainSignal puts the Beanstalk service in drain mode.
var drainSignal os.Signal = syscall.SIGUSR1

// stopSelf drains and stops the process as SIGTERM does, through the
// signal itself, so that a second signal still exits at once.
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGTERM) }
