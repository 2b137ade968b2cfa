package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// syscallRounds and syscallCalls size the measurement: the median of
// several rounds, so one preempted round does not decide it.
const (
	syscallRounds = 9
	syscallCalls  = 200_000
)

// runSyscall prints how long a system call that does no work takes here,
// as syscall_ns=N. The benchmark scripts print it with the machine: the
// servers make a few calls per job, so their ratios depend on this cost
// (about 1 µs on a guest with page-table isolation and no PCID, a fifth
// of that with PCID), and sittings are comparable only on like hosts.
func runSyscall(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: jobgate-bench syscall")
		return 2
	}
	per := make([]time.Duration, syscallRounds)
	for i := range per {
		start := time.Now()
		for range syscallCalls {
			nullSyscall()
		}
		per[i] = time.Since(start) / syscallCalls
	}
	slices.Sort(per)
	fmt.Fprintf(stdout, "syscall_ns=%d\n", per[len(per)/2].Nanoseconds())
	return 0
}
