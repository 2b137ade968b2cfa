//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process is the process's CPU time so far, every thread.
func Process() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
