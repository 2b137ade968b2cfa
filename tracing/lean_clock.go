package tracing

import (
	"sync/atomic"
	"time"
)

// The lean path's clock. A job's spans read the time five or six times
// (send start and end, receive start, delivery, the outcome), and time.Now
// reads two clocks, the wall clock and the monotonic one: about 100 ns here
// against 35 ns for the monotonic clock alone (time.Since of a reading
// that has one). So the lean path reads only the monotonic clock and turns
// it into wall time with a base, one time.Now() kept with its Unix
// nanoseconds, that the first reader after leanClockRefresh replaces.
//
// Spans of one job must keep their order. Between two bases the readings
// follow the monotonic clock, so they never go back. A new base could
// start a little behind the old one's readings: time.Now() reads the wall
// clock before the monotonic one, and the thread may run late in between.
// So a base also has a floor, the old base's reading at the moment the
// new one was read: readings stay at the floor until the wall clock
// passes it. A step back of the wall clock by more than leanClockStep,
// seen in two pairs of readings, is followed, as time.Now() would show it.
//
// Every clock reading of the traced paths goes through here (Tracer.Now),
// so that one job's times come from one clock: for at most a refresh
// period after the wall clock steps, these readings lag the step.

// leanClockRefresh is how long a base serves before a reader replaces it.
const leanClockRefresh = 100 * time.Millisecond

// leanClockStep is how far back a new base may be from the old one's
// reading before it counts as a step of the wall clock, followed at once,
// rather than slewing, which the floor evens out.
const leanClockStep = time.Millisecond

// clockBase is one reading of both clocks.
type clockBase struct {
	t     time.Time // its monotonic reading is the one used
	wall  int64     // Unix nanoseconds
	floor int64     // no reading from this base is earlier
}

// leanClock makes wall times from monotonic readings.
type leanClock struct {
	base atomic.Pointer[clockBase]
	// read reads both clocks: time.Now() and its Unix nanoseconds, except
	// in tests, which move the wall clock apart from the monotonic one.
	read   func() (time.Time, int64)
	period time.Duration // leanClockRefresh, except in tests
}

// theClock is the clock of every lean span: one per process, as the wall
// clock is.
var theClock = newLeanClock(readClocks, leanClockRefresh)

// readClocks reads the real clocks.
func readClocks() (time.Time, int64) {
	t := time.Now()
	return t, t.UnixNano()
}

func newLeanClock(read func() (time.Time, int64), period time.Duration) *leanClock {
	c := &leanClock{read: read, period: period}
	t, wall := read()
	c.base.Store(&clockBase{t: t, wall: wall})
	return c
}

// unixNano returns the wall time in Unix nanoseconds from one reading of
// the monotonic clock, or two clock readings when the base is due.
func (c *leanClock) unixNano() int64 {
	for {
		b := c.base.Load()
		d := time.Since(b.t) // the monotonic clock only
		if d >= c.period || d < 0 {
			return c.refresh(b)
		}
		// A base replaced meanwhile may be ahead of b: read again, so that
		// no reading after a newer one is earlier.
		if c.base.Load() == b {
			return max(b.wall+int64(d), b.floor)
		}
	}
}

// refresh replaces base b with a new reading and returns the time. The
// new base's floor is b's reading at the same moment, unless the wall
// clock stepped back by more than leanClockStep. Concurrent readers race
// to replace b; the losers read the winner's base.
func (c *leanClock) refresh(b *clockBase) int64 {
	t, wall := c.read()
	old := max(b.wall+int64(t.Sub(b.t)), b.floor)
	if old-wall > int64(leanClockStep) {
		// A step back, or this thread descheduled between its readings
		// of the two clocks (the wall clock is read first): a second pair
		// tells them apart.
		t, wall = c.read()
		old = max(b.wall+int64(t.Sub(b.t)), b.floor)
	}
	n := &clockBase{t: t, wall: wall}
	if old > wall && old-wall <= int64(leanClockStep) {
		n.floor = old
	}
	if c.base.CompareAndSwap(b, n) {
		return max(n.wall, n.floor)
	}
	return c.unixNano()
}

// leanNow is the lean spans' current time in Unix nanoseconds.
func leanNow() int64 { return theClock.unixNano() }

// leanTime is leanNow as a time.Time (without a monotonic reading).
func leanTime() time.Time { return time.Unix(0, leanNow()) }

// Now returns the time that t's job spans take for "now", for the proxy's
// start times (Message.Start, StartSendBare): on the lean path a wall time
// made from the monotonic clock alone, consistent with the times the spans
// read themselves, so one job's spans stay in order; time.Now() otherwise.
func (t *Tracer) Now() time.Time {
	if t != nil && t.lean != nil {
		return leanTime()
	}
	return time.Now()
}
