//go:build unix

package main

import (
	"syscall"
	"time"
)

// selfCPU returns the CPU time (user+system) this process has used, from
// getrusage(RUSAGE_SELF), so a run can report what the generator itself
// costs per operation.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
