package beanstalk

import (
	"testing"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// TestWaiterChoiceAsBeanstalkd: the waiting session a new job goes to is
// the one beanstalkd's waiting set picks (ms_take: a cursor that moves on
// after each take, over an array whose removals swap the last element in),
// not simply the longest waiter. With A and B waiting, A gets the first
// job; C then waits behind B, and the cursor, now past B's slot, gives the
// second job to C. (The differential test found this against beanstalkd
// 1.12, which answers so on the wire.)
func TestWaiterChoiceAsBeanstalkd(t *testing.T) {
	e, _ := newTestEngine(t)
	a, b, c := newConn(t, e), newConn(t, e), newConn(t, e)
	p := newConn(t, e)
	a.startReserve()
	b.startReserve()
	p.put(0, 0, 10, "one")
	a.mustResult(wire.Reserved)
	b.pending()
	c.startReserve()
	p.put(0, 0, 10, "two")
	if r := c.mustResult(wire.Reserved); string(r.Body) != "two" {
		t.Fatalf("body %q", r.Body)
	}
	b.pending()
	p.put(0, 0, 10, "three")
	b.mustResult(wire.Reserved)
}

// TestWaiterChoiceAfterRemoval: a waiter leaving the set (here by closing)
// moves the last one into its slot, as beanstalkd's ms_remove does. A, B,
// C wait; B closes, so C takes B's slot: [A, C]; the next two jobs go to A
// then C.
func TestWaiterChoiceAfterRemoval(t *testing.T) {
	e, _ := newTestEngine(t)
	a, b, c, d := newConn(t, e), newConn(t, e), newConn(t, e), newConn(t, e)
	p := newConn(t, e)
	a.startReserve()
	b.startReserve()
	c.startReserve()
	d.startReserve()
	b.s.Close()
	// [A, D, C], cursor 0: A, then [C, D] with the cursor at 1: D, then C.
	p.put(0, 0, 10, "1")
	a.mustResult(wire.Reserved)
	p.put(0, 0, 10, "2")
	d.mustResult(wire.Reserved)
	c.pending()
	p.put(0, 0, 10, "3")
	c.mustResult(wire.Reserved)
}

// TestWaiterChoiceAfterImmediateReserve: a reserve answered at once moves
// the cursor of the job's tube too (beanstalkd makes the session a waiter
// and picks it), so of B and C waiting next, C gets the next job.
func TestWaiterChoiceAfterImmediateReserve(t *testing.T) {
	e, _ := newTestEngine(t)
	a, b, c := newConn(t, e), newConn(t, e), newConn(t, e)
	p := newConn(t, e)
	p.put(0, 0, 10, "1")
	a.reserveNow()
	b.startReserve()
	c.startReserve()
	p.put(0, 0, 10, "2")
	c.mustResult(wire.Reserved)
	b.pending()
}

// TestCloseReturnsInReservationOrder: a closing session's jobs go back to
// ready in the order it reserved them, each to a waiter at once, as
// beanstalkd does; not in TTR order (job 2, with the shorter TTR, would
// come first).
func TestCloseReturnsInReservationOrder(t *testing.T) {
	e, _ := newTestEngine(t)
	a, w := newConn(t, e), newConn(t, e)
	p := newConn(t, e)
	p.put(0, 0, 10, "one")
	p.put(0, 0, 5, "two")
	a.reserveNow()
	a.reserveNow()
	w.startReserve()
	a.s.Close()
	if r := w.mustResult(wire.Reserved); string(r.Body) != "one" {
		t.Fatalf("the waiter got %q, want the job reserved first", r.Body)
	}
}

// TestCloseOrderAfterReserveAgain: a job released and reserved again by
// the same session counts from its latest reservation, and many
// reservations in a row (the list pruned on the way) keep the order.
func TestCloseOrderAfterReserveAgain(t *testing.T) {
	e, _ := newTestEngine(t)
	a, w := newConn(t, e), newConn(t, e)
	p := newConn(t, e)
	one := p.put(0, 0, 10, "one")
	p.put(0, 0, 10, "two")
	a.reserveNow()
	a.reserveNow()
	for range 40 { // past the pruning threshold
		a.want(wire.Command{Verb: wire.Release, ID: one}, wire.Released)
		if id, _ := a.reserveNow(); id != one {
			t.Fatalf("reserved %d, want %d", id, one)
		}
		if n := len(a.s.resOrder); n > 2*2+16+1 {
			t.Fatalf("%d reservation entries for 2 jobs held", n)
		}
	}
	w.startReserve()
	a.s.Close()
	if r := w.mustResult(wire.Reserved); string(r.Body) != "two" {
		t.Fatalf("the waiter got %q, want two (one was reserved again later)", r.Body)
	}
	if n := len(a.s.resOrder); n != 0 {
		t.Fatalf("closed session keeps %d entries", n)
	}
}
