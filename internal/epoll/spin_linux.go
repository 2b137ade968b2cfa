package epoll

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// Polling for a while before blocking (jobgate's loop_spin; off by
// default).
//
// On a machine of two or more CPUs, a loop that serves one request at a
// time blocks after each reply, and the client's next request must wake
// it. When the loop's CPU has gone idle meanwhile, that wake-up costs
// both sides more than the request's work on a virtual machine. A loop
// that keeps polling for a few tens of microseconds is still running when
// the request comes, so nothing needs waking: on two vCPUs shared with
// the load generator, one Beanstalk connection putting ran about a third
// faster with a lower p99, and a Gearman client echoing a quarter faster.
// The price is the CPU spent polling, which is taken from whatever else
// wants that CPU: with the CPUs already busy (many connections, or a
// gateway sharing the machine with its upstream servers) the same
// setting lost up to a quarter of the throughput. Between polls the loop
// calls sched_yield, so a thread waiting for its CPU gets it; that
// lessened the losses without removing them (docs/BENCHMARKS.md,
// "Spinning before the loop sleeps"). Hence opt-in, for servers whose
// CPUs are not all busy.

// spinFor is SetSpin's setting, in nanoseconds.
var spinFor atomic.Int64

// SetSpin makes the pollers NewWoken opens from now on poll for up to d
// before they block when nothing is ready, if the process then has more
// than one P (with one, polling would only keep the peer it waits for
// from running). 0, the default, blocks at once. Pollers already open
// keep what they chose.
func SetSpin(d time.Duration) { spinFor.Store(int64(max(d, 0))) }

// spinSetting is the spin a poller opened now takes: SetSpin's duration,
// or 0 with one P.
func spinSetting() time.Duration {
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	return time.Duration(spinFor.Load())
}

// spinStats counts a poller's spins; tests read them.
type spinStats struct {
	caught uint64 // spins that found an event
	missed uint64 // spins that ended with nothing ready
}

// spin polls without blocking, yielding the CPU between polls, until an
// event is ready or budget has passed. It returns what the last poll
// returned and how long it spun.
func (p *Poller) spin(evs []syscall.EpollEvent, budget time.Duration) (uintptr, syscall.Errno, time.Duration) {
	start := time.Now()
	for {
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		n, e := rawWait(p.fd, evs)
		spent := time.Since(start)
		if e != 0 || n > 0 {
			p.spun.caught++
			return n, e, spent
		}
		if spent >= budget {
			p.spun.missed++
			return 0, 0, spent
		}
	}
}

// spinBudget is how long a wait of msec milliseconds (-1: no limit)
// spins: the poller's spin, but no longer than the wait.
func (p *Poller) spinBudget(msec int) time.Duration {
	if msec > 0 {
		return min(p.spinDur, time.Duration(msec)*time.Millisecond)
	}
	return p.spinDur
}

// Spin returns how long the poller's Wait polls before it blocks: what
// SetSpin said when the poller opened, or 0.
func (p *Poller) Spin() time.Duration { return p.spinDur }
