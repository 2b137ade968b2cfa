// Package clock gives the engines their time. The engines never call
// time.Now or start timers themselves: they take a Clock, so the servers run
// on the real one and tests move a Fake by hand.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and runs functions later.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop cancels the call. It reports whether the call was still pending.
	Stop() bool
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a Clock that moves only when told to. Timers fire synchronously,
// in deadline order, inside Advance and Set, on the caller's goroutine; so a
// test that advances the clock sees every effect of the expired timers as
// soon as Advance returns.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *Fake
	at   time.Time
	seq  uint64 // tie-break: timers due at the same instant fire in creation order
	f    func()
	done bool // fired or stopped; guarded by c.mu
}

// NewFake returns a Fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the fake time reaches Now()+d. A timer
// with d <= 0 fires at the next Advance or Set, even Advance(0).
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop cancels the timer.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

// Advance moves the clock forward by d, firing every timer that comes due,
// each with the clock set to its deadline.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the clock to t (never backwards), firing due timers in order.
// Timers created by a firing function are considered too.
func (c *Fake) Set(t time.Time) {
	for {
		c.mu.Lock()
		next := c.nextDueLocked(t)
		if next == nil {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next.done = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// Pending returns the number of timers that have neither fired nor been stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// nextDueLocked drops finished timers and returns the earliest one due at or
// before limit, or nil.
func (c *Fake) nextDueLocked(limit time.Time) *fakeTimer {
	live := c.timers[:0]
	for _, t := range c.timers {
		if !t.done {
			live = append(live, t)
		}
	}
	for i := len(live); i < len(c.timers); i++ {
		c.timers[i] = nil
	}
	c.timers = live
	sort.Slice(live, func(i, j int) bool {
		if !live[i].at.Equal(live[j].at) {
			return live[i].at.Before(live[j].at)
		}
		return live[i].seq < live[j].seq
	})
	if len(live) == 0 || live[0].at.After(limit) {
		return nil
	}
	return live[0]
}
