package epoll

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// Polling for a while before blocking (jobgate's loop_spin).
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
// wants that CPU. Between polls the loop calls sched_yield, so a thread
// waiting for its CPU gets it, and it spins only while its waits bring
// one event at a time (spinGate, below). Even so, a gateway in front of
// gearmand on the same two CPUs lost 8–20% of its rate of background
// submits (docs/BENCHMARKS.md, "Spinning before the loop sleeps"). Hence
// jobgate does not spin by default when an upstream's address is a
// loopback one (config.Config.EventLoopSpin).

// spinFor is SetSpin's setting, in nanoseconds.
var spinFor atomic.Int64

// SetSpin makes the pollers NewWoken opens from now on poll for up to d
// before they block when nothing is ready, while their waits bring one
// event at a time (spinGate), if the process then has more than one P
// (with one, polling would only keep the peer it waits for from
// running). 0 blocks at once. Pollers already open keep what they chose.
func SetSpin(d time.Duration) { spinFor.Store(int64(max(d, 0))) }

// spinSetting is the spin a poller opened now takes: SetSpin's duration,
// or 0 with one P.
func spinSetting() time.Duration {
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	return time.Duration(spinFor.Load())
}

// A loop spins only while its waits bring one event at a time.
//
// Why: when several sockets turn ready while a loop sleeps, its next wait
// returns them together, and the loop reads them with one system call
// and writes their replies with another. A spinning loop returns as soon
// as the first is ready and handles each apart: the batching is lost. On
// two vCPUs that cost 4–27% of the throughput of every workload with more
// than one connection (docs/BENCHMARKS.md, "Spinning before the loop
// sleeps"). A wait that brings one event has nothing to batch, and the
// wake-up it spares is the whole gain. So a poller keeps a moving average
// of the events its blocking waits returned, and spins only while that
// is about one; every spinGateProbe-th wait blocks even then, so that the
// average follows the load when it changes.

// spinGate is a poller's record of how many events its blocking waits
// returned. Its zero value lets every wait but the probes spin.
type spinGate struct {
	// avg is the moving average of events per blocking wait, in units of
	// spinGateOne; it weighs each new wait by an eighth.
	avg   uint32
	waits uint32
}

const (
	// spinGateOne is one event in spinGate.avg's units: fine enough for
	// integer steps of an eighth to settle near one event, not above it.
	spinGateOne = 256
	// spinGateBelow is the average under which waits spin: 1.25 events.
	spinGateBelow = spinGateOne + spinGateOne/4
	// spinGateProbe: one wait in this many blocks although the gate is
	// open, to see whether events still come one at a time.
	spinGateProbe = 16
	// spinGateMax caps the events one wait adds to the average.
	spinGateMax = 16
)

// closedSpinGate is the gate a poller starts with: two events a wait, so
// that it spins only once its waits have shown single events.
func closedSpinGate() spinGate { return spinGate{avg: 2 * spinGateOne} }

// open reports whether this wait may spin. Every call counts a wait.
func (g *spinGate) open() bool {
	g.waits++
	return g.waits%spinGateProbe != 0 && g.avg < spinGateBelow
}

// observe adds a blocking wait that returned n events; a wait that timed
// out (n 0) tells nothing.
func (g *spinGate) observe(n int) {
	if n <= 0 {
		return
	}
	g.avg = g.avg - g.avg/8 + uint32(min(n, spinGateMax))*spinGateOne/8
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
