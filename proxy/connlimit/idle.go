package connlimit

import (
	"sync"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

// Idle calls a function once a connection has been idle for a timeout:
// no frame received and nothing pending for that long. "Pending" is
// whatever the protocol layer brackets with Begin and End: a request
// awaiting its reply, a worker blocked in reserve or asleep after
// PRE_SLEEP, a job reserved or assigned to the connection. A pending
// connection is never idle, however long it stays quiet.
//
// Touch costs a clock read and an uncontended lock: it only records the
// time. One timer runs at a time and, when it fires early (the connection
// was touched since it was set), it re-arms for the remainder, so a busy
// connection does not stop and start a timer per frame.
//
// Time comes from an injected clock.Clock, so tests drive it with
// clock.Fake. It is safe for concurrent use: the read loop Touches and
// Begins, reply paths End.
type Idle struct {
	clk     clock.Clock
	timeout time.Duration
	onIdle  func()

	mu      sync.Mutex // guards the fields below
	last    time.Time  // last Touch, or the End that left nothing pending
	pending int
	timer   clock.Timer // nil when not armed
	done    bool        // fired or stopped
}

// NewIdle returns an Idle that calls onIdle (on the clock's timer
// goroutine, once) after timeout of idleness, counted from now. A timeout
// of 0 or less disables it: every method is then a no-op and onIdle is
// never called.
func NewIdle(clk clock.Clock, timeout time.Duration, onIdle func()) *Idle {
	i := &Idle{clk: clk, timeout: timeout, onIdle: onIdle}
	if timeout <= 0 {
		i.done = true
		return i
	}
	i.mu.Lock()
	i.last = clk.Now()
	i.armLocked(timeout)
	i.mu.Unlock()
	return i
}

// Touch records activity: a frame arrived.
func (i *Idle) Touch() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.done {
		return
	}
	i.last = i.clk.Now()
	if i.pending == 0 && i.timer == nil {
		i.armLocked(i.timeout)
	}
}

// Begin marks one more thing pending. While anything is pending the
// connection is not idle.
func (i *Idle) Begin() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.done {
		return
	}
	i.pending++
	// The armed timer, if any, is left to fire and find something
	// pending; stopping it here would cost a timer operation per request.
}

// End marks one pending thing finished. When nothing is left pending, the
// idle time starts counting from now.
func (i *Idle) End() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.done || i.pending == 0 {
		return
	}
	i.pending--
	if i.pending == 0 {
		i.last = i.clk.Now()
		if i.timer == nil {
			i.armLocked(i.timeout)
		}
	}
}

// Pending returns how many things are pending.
func (i *Idle) Pending() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.pending
}

// Stop disables the timer for good (the connection is closing). It
// reports whether onIdle had not been called and now never will be.
func (i *Idle) Stop() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.done {
		return false
	}
	i.done = true
	if i.timer != nil {
		i.timer.Stop()
		i.timer = nil
	}
	return true
}

func (i *Idle) armLocked(d time.Duration) {
	i.timer = i.clk.AfterFunc(d, i.fire)
}

// fire runs when the timer is due: it calls onIdle if the connection really
// has been idle for the timeout, and otherwise re-arms for what is left
// (or, with something pending, leaves re-arming to End).
func (i *Idle) fire() {
	i.mu.Lock()
	i.timer = nil
	if i.done || i.pending > 0 {
		i.mu.Unlock()
		return
	}
	if rest := i.timeout - i.clk.Now().Sub(i.last); rest > 0 {
		i.armLocked(rest)
		i.mu.Unlock()
		return
	}
	i.done = true
	i.mu.Unlock()
	i.onIdle()
}
