//go:build linux

package proxy

import (
	"os"
	"runtime"
	"sync"
)

// loopProcsOnce guards loopProcs.
var loopProcsOnce sync.Once

// loopProcs gives the Go runtime a second P once an event loop runs, when
// it has one only (GOMAXPROCS 1: a process pinned to one CPU, or a
// one-CPU machine). The loop blocks in epoll_pwait through a system call
// while it holds its P; with no idle P the runtime's sysmon retakes that P
// after 20 µs of every wait, and keeps polling every 20 µs instead of
// backing off to 10 ms. On one CPU that cost 15% of the server's CPU time
// with 16 KiB puts (docs/BENCHMARKS.md, "Large bodies on the loop"). An
// idle second P stops both and runs no thread of its own. A GOMAXPROCS
// set in the environment is left as it is.
func loopProcs() {
	loopProcsOnce.Do(func() { raiseProcs(os.Getenv("GOMAXPROCS")) })
}

// raiseProcs sets GOMAXPROCS to 2 if it is 1 and env (the GOMAXPROCS
// environment variable) is empty.
func raiseProcs(env string) {
	if env == "" && runtime.GOMAXPROCS(0) == 1 {
		runtime.GOMAXPROCS(2)
	}
}
