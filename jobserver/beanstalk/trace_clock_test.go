package beanstalk

import (
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// clockHook is a TraceHook with a clock of its own, whose wall time the
// test steps as a real wall clock can step, apart from the engine's clock.
type clockHook struct {
	traceEvents
	now      int64
	readings int
}

func (h *clockHook) TraceNow() int64 { h.readings++; return h.now }

// readyOf returns traced job id's ready time in Unix ns, from JobTrace.
func readyOf(t *testing.T, e *Engine, id uint64) int64 {
	t.Helper()
	jt, ok := e.JobTrace(id)
	if !ok {
		t.Fatalf("job %d has no trace", id)
	}
	return jt.Ready.UnixNano()
}

// TestTraceReadyOnTraceClock: a hook that is a TraceClock gives traced
// jobs their ready times, whatever the engine's clock says: at a put (plus
// its delay), a release (plus its delay), a TTR expiry, a closed session
// and a kick. Before, the engine kept them on its own clock (its start
// plus monotonic time) while the spans read the tracer's, so a step of the
// wall clock between a put and its reserve showed in the queue wait: the
// steps below (back an hour, forward a day) would be off by that much.
func TestTraceReadyOnTraceClock(t *testing.T) {
	e, fc := newTestEngine(t)
	h := &clockHook{now: testStart.UnixNano()}
	e.SetTraceHook(h)
	c := newConn(t, e)
	c.s.SetCreation(testCreation(1))
	id := c.put(1, 0, 5, "now")
	c.s.SetCreation(testCreation(2))
	delayed := c.put(1, 30, 5, "later")
	if got := readyOf(t, e, id); got != h.now {
		t.Fatalf("put: ready %d, want %d", got, h.now)
	}
	if got, want := readyOf(t, e, delayed), h.now+int64(30*time.Second); got != want {
		t.Fatalf("delayed put: ready %d, want %d", got, want)
	}

	// The wall clock steps back an hour between the put and the reserve:
	// the reservation must report the ready time of the put, on the
	// spans' clock, not one an hour ahead of it.
	put := h.now
	h.now -= int64(time.Hour)
	fc.Advance(time.Second)
	w := newConn(t, e)
	r := w.id(wire.ReserveJob, id)
	jt, ok := w.s.ReservedTrace(r.ID)
	if !ok || jt.Ready.UnixNano() != put {
		t.Fatalf("ReservedTrace: ready %d (%v), want %d", jt.Ready.UnixNano(), ok, put)
	}
	h.now += int64(2 * time.Second)
	w.want(wire.Command{Verb: wire.Release, ID: id, Pri: 1, Delay: 10}, wire.Released)
	if got, want := readyOf(t, e, id), h.now+int64(10*time.Second); got != want {
		t.Fatalf("delayed release: ready %d, want %d", got, want)
	}

	// Forward a day, then the TTR runs out: ready at the expiry.
	fc.Advance(10 * time.Second)
	h.now += int64(24 * time.Hour)
	w.id(wire.ReserveJob, id)
	fc.Advance(5 * time.Second)
	if len(h.timedOut) != 1 || readyOf(t, e, id) != h.now {
		t.Fatalf("TTR expiry: timed out %v, ready %d, want %d", h.timedOut, readyOf(t, e, id), h.now)
	}
	h.now += int64(time.Millisecond)
	w.id(wire.ReserveJob, id)
	w.s.Close()
	if len(h.abandoned) != 1 || readyOf(t, e, id) != h.now {
		t.Fatalf("closed session: abandoned %v, ready %d, want %d", h.abandoned, readyOf(t, e, id), h.now)
	}

	// A kick of the delayed job makes it ready at the kick.
	h.now += int64(time.Millisecond)
	c.want(wire.Command{Verb: wire.KickJob, ID: delayed}, wire.Kicked)
	if got := readyOf(t, e, delayed); got != h.now {
		t.Fatalf("kick: ready %d, want %d", got, h.now)
	}
}

// TestTraceClockNotReadForUntraced: untraced jobs cost no reading of the
// hook's clock, on any of their moves.
func TestTraceClockNotReadForUntraced(t *testing.T) {
	e, fc := newTestEngine(t)
	h := &clockHook{now: 1}
	e.SetTraceHook(h)
	c := newConn(t, e)
	id := c.put(1, 0, 5, "plain")
	c.put(1, 5, 5, "plain delayed")
	w := newConn(t, e)
	w.id(wire.ReserveJob, id)
	w.want(wire.Command{Verb: wire.Release, ID: id, Pri: 1, Delay: 1}, wire.Released)
	fc.Advance(2 * time.Second)
	w.id(wire.ReserveJob, id)
	fc.Advance(6 * time.Second) // TTR expiry
	if h.readings != 0 {
		t.Fatalf("%d readings of the trace clock for untraced jobs, want 0", h.readings)
	}
	c.s.SetCreation(testCreation(3))
	c.put(1, 0, 5, "traced")
	if h.readings != 1 {
		t.Fatalf("%d readings for one traced put, want 1", h.readings)
	}
}

// TestReservedUndone: a session's noted reservation is marked undone when
// its TTR runs out or its session closes, and a new reservation clears
// the mark; an untraced job's moves leave it.
func TestReservedUndone(t *testing.T) {
	e, fc := newTestEngine(t)
	e.SetTraceHook(&traceEvents{})
	c := newConn(t, e)
	c.s.SetCreation(testCreation(4))
	id := c.put(1, 0, 1, "traced")
	plain := c.put(1, 0, 1, "plain")
	w := newConn(t, e)
	w.id(wire.ReserveJob, id)
	if undone, _ := w.s.ReservedUndone(); undone {
		t.Fatal("undone at its reservation")
	}
	fc.Advance(2 * time.Second)
	if undone, timedOut := w.s.ReservedUndone(); !undone || !timedOut {
		t.Fatalf("after the TTR: undone %v, timed out %v, want both", undone, timedOut)
	}
	w.id(wire.ReserveJob, id)
	if undone, _ := w.s.ReservedUndone(); undone {
		t.Fatal("a new reservation is still marked undone")
	}
	w.id(wire.ReserveJob, plain)
	w.s.Close()
	if undone, timedOut := w.s.ReservedUndone(); !undone || timedOut {
		t.Fatalf("after close: undone %v, timed out %v, want undone by close", undone, timedOut)
	}
	// Another session's reservation of the job leaves w's mark alone.
	x := newConn(t, e)
	x.id(wire.ReserveJob, id)
	x.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
	if _, ok := x.s.ReservedTrace(id); !ok {
		t.Fatal("no reserved trace")
	}
	if undone, _ := x.s.ReservedUndone(); undone {
		t.Fatal("a deleted job's reservation is marked undone")
	}
}

// TestTraceReadyFromPut: a put given its time on the trace clock
// (SetCreationAt), as the proxy's are, is ready at that time plus its
// delay without a reading of the hook's clock; a put that waits for its
// journal record reads the clock when it becomes ready; the time is not
// kept for a later put or another job's move.
func TestTraceReadyFromPut(t *testing.T) {
	e, fc := newTestEngine(t)
	h := &clockHook{now: testStart.UnixNano()}
	e.SetTraceHook(h)
	c := newConn(t, e)
	at := h.now - 1000
	c.s.SetCreationAt(testCreation(1), at)
	id := c.put(1, 0, 5, "now")
	c.s.SetCreationAt(testCreation(2), at)
	delayed := c.put(1, 30, 5, "later")
	if h.readings != 0 {
		t.Fatalf("%d readings of the trace clock, want 0", h.readings)
	}
	if got := readyOf(t, e, id); got != at {
		t.Fatalf("put: ready %d, want %d", got, at)
	}
	if got, want := readyOf(t, e, delayed), at+int64(30*time.Second); got != want {
		t.Fatalf("delayed put: ready %d, want %d", got, want)
	}
	c.s.SetCreation(testCreation(3))
	id = c.put(1, 0, 5, "read")
	if got := readyOf(t, e, id); h.readings != 1 || got != h.now {
		t.Fatalf("put without its time: %d readings, ready %d, want %d", h.readings, got, h.now)
	}
	w := newConn(t, e)
	w.id(wire.ReserveJob, id)
	h.now += 7
	fc.Advance(6 * time.Second) // TTR expiry: read, not a put's time
	if got := readyOf(t, e, id); got != h.now {
		t.Fatalf("TTR expiry: ready %d, want %d", got, h.now)
	}

	m := &memJournal{}
	je := newMemEngine(t, m)
	jh := &clockHook{now: 5000}
	je.SetTraceHook(jh)
	jc := newConn(t, je)
	jc.s.SetCreationAt(testCreation(4), 10)
	id = jc.put(1, 0, 5, "durable")
	if got := readyOf(t, je, id); jh.readings != 1 || got != jh.now {
		t.Fatalf("journaled put: %d readings, ready %d, want %d", jh.readings, got, jh.now)
	}
}
