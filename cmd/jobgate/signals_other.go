//go:build !unix

package main

import (
	"os"
	"syscall"
)

// drainSignal is nil: there is no SIGUSR1 here; the admin switch drains.
var drainSignal os.Signal

// stopSelf drains and stops the process as SIGTERM would; a process
// cannot signal itself here, so serve takes the request from selfStop.
func stopSelf() {
	select {
	case selfStop <- syscall.SIGTERM:
	default:
	}
}
