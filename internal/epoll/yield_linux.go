package epoll

import (
	"runtime"
	"time"
)

// A loop goroutine yields to the scheduler every YieldEvery.
//
// Why: a loop makes its reads and writes as raw system calls, so the Go
// scheduler never sees it stop; only blocking in Wait's system call does
// (entersyscall). To sysmon such a goroutine has run on the same
// scheduling tick for ever. After 10 ms of that, sysmon preempts it with
// a signal when it is running (the loop then often resumes on another
// thread), and takes its P whenever it is blocked in epoll_pwait, however
// briefly; every such retake also resets sysmon's own sleep to 20 µs.
// Behind the Gearman gateway that made 500–900 sysmon wake-ups a second,
// about 0.1 nanosleep and 0.007 preemption signals per proxied job, and
// sysmon's thread 2–3% of the gateway's CPU (docs/BENCHMARKS.md, "The
// gateway's system calls against haproxy's"). A runtime.Gosched every
// few milliseconds starts a new tick for the cost of one futex wake-up
// of an idle thread; sysmon then finds nothing to retake and backs off
// to its 10 ms sleep.

// YieldEvery is how often Wait lets the loop goroutine yield: well under
// the runtime's 10 ms preemption limit, so that sysmon never sees a tick
// that old.
const YieldEvery = 5 * time.Millisecond

// yieldCheck: Wait reads the clock once in this many calls (a power of
// two), which a busy loop makes thousands of times a second.
const yieldCheck = 8

// yielder is a Poller's yield state; its zero value yields with
// runtime.Gosched by the monotonic clock.
type yielder struct {
	calls uint32
	last  time.Time
	// now and yield replace time.Now and runtime.Gosched in tests.
	now   func() time.Time
	yield func()
}

// maybeYield is called by Wait: it yields if YieldEvery has passed since
// the last yield, checking the clock every yieldCheck calls.
func (y *yielder) maybeYield() {
	y.calls++
	if y.calls%yieldCheck != 0 {
		return
	}
	now := y.now
	if now == nil {
		now = time.Now
	}
	t := now()
	if t.Sub(y.last) < YieldEvery {
		return
	}
	y.last = t
	if y.yield != nil {
		y.yield()
		return
	}
	runtime.Gosched()
}
