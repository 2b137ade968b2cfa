package beanstalk

import (
	"strings"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

func TestCloseReturnsReservations(t *testing.T) {
	e, fc := newTestEngine(t)
	p := newConn(t, e)
	p.put(1, 0, 10, "a")
	p.put(1, 0, 10, "b")
	w := newConn(t, e)
	w.reserveNow()
	w.reserveNow()
	other := newConn(t, e)
	other.startReserve()
	w.s.Close()
	r := other.mustResult(wire.Reserved)
	if r.ID != 1 {
		t.Fatalf("waiter got %d, want 1", r.ID)
	}
	if p.jobStat(2, "state") != "ready" {
		t.Fatal("job 2 not back in ready")
	}
	if p.jobStat(2, "timeouts") != "0" || p.jobStat(2, "releases") != "0" {
		t.Fatal("close counted a timeout or release")
	}
	if got := p.stat("current-connections"); got != "2" {
		t.Fatalf("current-connections %s", got)
	}
	if got := p.stat("current-workers"); got != "1" {
		t.Fatalf("current-workers %s", got)
	}
	// The closed session's timer entries are gone: nothing fires.
	fc.Advance(time.Minute)
	if p.jobStat(2, "state") != "ready" {
		t.Fatal("state changed after close")
	}
	w.s.Close() // idempotent
}

func TestCloseWhileWaiting(t *testing.T) {
	e, _ := newTestEngine(t)
	w := newConn(t, e)
	w.watch("x")
	w.startReserve()
	w.s.Close()
	p := newConn(t, e)
	if got := p.stat("current-waiting"); got != "0" {
		t.Fatalf("current-waiting %s", got)
	}
	p.want(wire.Command{Verb: wire.StatsTube, Tube: []byte("x")}, wire.NotFound)
	p.put(0, 0, 1, "x")
	if p.stat("current-jobs-ready") != "1" {
		t.Fatal("job given to a closed session")
	}
}

func TestQuitClosesSession(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 10, "x")
	c.reserveNow()
	r := c.do(wire.Command{Verb: wire.Quit})
	if r.Kind != 0 {
		t.Fatalf("quit replied %s", show(r))
	}
	d := newConn(t, e)
	if d.jobStat(1, "state") != "ready" {
		t.Fatal("quit did not return the reservation")
	}
}

func TestCancelPendingReserve(t *testing.T) {
	e, _ := newTestEngine(t)
	w := newConn(t, e)
	w.startReserve()
	w.s.Cancel()
	w.mustResult(wire.TimedOut)
	if w.notified != 0 {
		t.Fatal("cancel notified")
	}
	p := newConn(t, e)
	p.put(0, 0, 10, "x")
	if p.stat("current-jobs-ready") != "1" || p.stat("current-waiting") != "0" {
		t.Fatal("cancelled waiter still served")
	}
	w.s.Cancel() // nothing pending: no effect
	if _, ok := w.result(); ok {
		t.Fatal("result after a no-op cancel")
	}
}

func TestCancelAfterDeliveryReturnsJob(t *testing.T) {
	e, _ := newTestEngine(t)
	w := newConn(t, e)
	w.startReserve()
	p := newConn(t, e)
	p.put(0, 0, 10, "x")
	if w.notified != 1 {
		t.Fatal("not notified of the delivery")
	}
	// A second waiter queued behind: the returned job must reach it.
	w2 := newConn(t, e)
	w2.startReserve()
	w.s.Cancel()
	w.mustResult(wire.TimedOut)
	r := w2.mustResult(wire.Reserved)
	if r.ID != 1 {
		t.Fatalf("w2 got %d", r.ID)
	}
	if got := p.jobStat(1, "reserves"); got != "1" {
		t.Fatalf("reserves %s, want 1 (the cancelled one does not count)", got)
	}
}

func TestCancelAfterDeliveryNoOtherWaiter(t *testing.T) {
	e, _ := newTestEngine(t)
	w := newConn(t, e)
	w.startReserve()
	p := newConn(t, e)
	p.put(5, 0, 10, "x")
	w.s.Cancel()
	if p.jobStat(1, "state") != "ready" || p.stat("current-jobs-reserved") != "0" {
		t.Fatal("job not back in ready")
	}
	if got := p.stat("current-jobs-urgent"); got != "1" {
		t.Fatalf("urgent %s", got)
	}
}

func TestTubeLifetime(t *testing.T) {
	e, _ := newTestEngine(t)
	a := newConn(t, e)
	list := func() string {
		return string(a.want(wire.Command{Verb: wire.ListTubes}, wire.OK).Body)
	}
	a.use("one")
	a.watch("two")
	a.watch("three")
	if got := list(); got != "---\n- default\n- one\n- two\n- three\n" {
		t.Fatalf("list-tubes %q", got)
	}
	if got := a.stat("current-tubes"); got != "4" {
		t.Fatalf("current-tubes %s", got)
	}
	a.put(1, 0, 10, "x") // tube one holds a job
	a.use("default")
	a.ignore("two") // "three" moves into two's slot
	if got := list(); got != "---\n- default\n- one\n- three\n" {
		t.Fatalf("list-tubes after ignore %q", got)
	}
	if got := string(a.want(wire.Command{Verb: wire.ListTubesWatched}, wire.OK).Body); got != "---\n- default\n- three\n" {
		t.Fatalf("list-tubes-watched %q", got)
	}
	a.want(wire.Command{Verb: wire.StatsTube, Tube: []byte("two")}, wire.NotFound)
	a.want(wire.Command{Verb: wire.PauseTube, Tube: []byte("two"), Delay: 1}, wire.NotFound)
	a.want(wire.Command{Verb: wire.Delete, ID: 1}, wire.Deleted) // "one" now unreferenced
	if got := list(); got != "---\n- default\n- three\n" {
		t.Fatalf("list-tubes after delete %q", got)
	}
	// The default tube outlives every reference.
	a.watch("three")
	a.ignore("default")
	a.s.Close()
	b := newConn(t, e)
	if got := string(b.want(wire.Command{Verb: wire.ListTubes}, wire.OK).Body); got != "---\n- default\n" {
		t.Fatalf("list-tubes after close %q", got)
	}
}

func TestTubeKeptByReservedJob(t *testing.T) {
	e, _ := newTestEngine(t)
	a := newConn(t, e)
	a.use("t")
	a.watch("t")
	a.put(1, 0, 10, "x")
	a.ignore("default")
	a.reserveNow()
	a.use("default")
	a.watch("default")
	a.ignore("t")
	a.want(wire.Command{Verb: wire.StatsTube, Tube: []byte("t")}, wire.OK)
	a.want(wire.Command{Verb: wire.Delete, ID: 1}, wire.Deleted)
	a.want(wire.Command{Verb: wire.StatsTube, Tube: []byte("t")}, wire.NotFound)
}

func TestWatchIgnore(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	if n := c.watch("default"); n != 1 {
		t.Fatalf("re-watch count %d", n)
	}
	if r := c.ignore("default"); r.Kind != wire.NotIgnored {
		t.Fatalf("ignore last: %s", show(r))
	}
	if r := c.ignore("nothere"); r.Kind != wire.Watching || r.Count != 1 {
		t.Fatalf("ignore unwatched: %s", show(r))
	}
	c.want(wire.Command{Verb: wire.StatsTube, Tube: []byte("nothere")}, wire.NotFound)
	c.watch("a")
	if r := c.ignore("default"); r.Kind != wire.Watching || r.Count != 1 {
		t.Fatalf("ignore default: %s", show(r))
	}
	if got := c.tubeStat("default", "current-watching"); got != "0" {
		t.Fatalf("default watching %s", got)
	}
	r := c.want(wire.Command{Verb: wire.ListTubeUsed}, wire.Using)
	if string(r.Tube) != "default" {
		t.Fatalf("list-tube-used %q", r.Tube)
	}
}

func TestPauseTube(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 10, "x")
	c.want(wire.Command{Verb: wire.PauseTube, Tube: []byte("default"), Delay: 10}, wire.Paused)
	fc.Advance(3 * time.Second)
	m := c.statsMap(wire.Command{Verb: wire.StatsTube, Tube: []byte("default")})
	if m["pause"] != "10" || m["pause-time-left"] != "7" || m["cmd-pause-tube"] != "1" {
		t.Fatalf("pause stats %v", m)
	}
	if r, done := c.reserveTimeout(0); !done || r.Kind != wire.TimedOut {
		t.Fatalf("reserve from a paused tube: %s", show(r))
	}
	c.want(wire.Command{Verb: wire.PeekReady}, wire.Found) // peek ignores pauses
	c.startReserve()
	fc.Advance(7*time.Second - time.Nanosecond)
	c.pending()
	fc.Advance(time.Nanosecond)
	c.mustResult(wire.Reserved)
	m = c.statsMap(wire.Command{Verb: wire.StatsTube, Tube: []byte("default")})
	if m["pause"] != "0" || m["pause-time-left"] != "0" {
		t.Fatalf("stats after pause %v", m)
	}
}

func TestPauseZeroUnpauses(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	c.want(wire.Command{Verb: wire.PauseTube, Tube: []byte("default"), Delay: 100}, wire.Paused)
	c.startReserve()
	p := newConn(t, e)
	p.put(1, 0, 10, "x")
	c.pending()
	p.want(wire.Command{Verb: wire.PauseTube, Tube: []byte("default"), Delay: 0}, wire.Paused)
	c.mustResult(wire.Reserved)
}

func TestDeadlineSoonWithReadyJobInPausedTube(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 2, "x")
	c.reserveNow()
	c.put(1, 0, 2, "y")
	c.want(wire.Command{Verb: wire.PauseTube, Tube: []byte("default"), Delay: 60}, wire.Paused)
	fc.Advance(1500 * time.Millisecond)
	// A job is ready (so no early DEADLINE_SOON), but paused: the wait ends
	// at once with DEADLINE_SOON, as in beanstalkd.
	c.want(wire.Command{Verb: wire.Reserve}, wire.DeadlineSoon)
}

func TestPeekVariants(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	for _, v := range []wire.Verb{wire.PeekReady, wire.PeekDelayed, wire.PeekBuried} {
		c.want(wire.Command{Verb: v}, wire.NotFound)
	}
	c.put(9, 0, 10, "r9")  // 1
	c.put(3, 0, 10, "r3")  // 2
	c.put(1, 20, 10, "d")  // 3
	c.put(1, 10, 10, "d2") // 4
	c.use("other")
	c.want(wire.Command{Verb: wire.PeekReady}, wire.NotFound) // used tube only
	c.use("default")
	if r := c.want(wire.Command{Verb: wire.PeekReady}, wire.Found); r.ID != 2 || string(r.Body) != "r3" {
		t.Fatalf("peek-ready %s", show(r))
	}
	if r := c.want(wire.Command{Verb: wire.PeekDelayed}, wire.Found); r.ID != 4 {
		t.Fatalf("peek-delayed %s", show(r))
	}
	if r := c.want(wire.Command{Verb: wire.Peek, ID: 3}, wire.Found); string(r.Body) != "d" {
		t.Fatalf("peek 3 %s", show(r))
	}
	m := c.statsMap(wire.Command{Verb: wire.Stats})
	if m["cmd-peek"] != "1" || m["cmd-peek-ready"] != "3" || m["cmd-peek-delayed"] != "2" || m["cmd-peek-buried"] != "1" {
		t.Fatalf("peek counters %v", m)
	}
}

func TestPutLimitsAndDrain(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	big := strings.Repeat("x", DefaultMaxJobSize+1)
	c.want(wire.Command{Verb: wire.Put, TTR: 1, Body: []byte(big)}, wire.JobTooBig)
	c.want(wire.Command{Verb: wire.Put, TTR: 1, Body: []byte(big[1:])}, wire.Inserted)
	e.SetDraining(true)
	c.want(wire.Command{Verb: wire.Put, TTR: 1, Body: []byte("x")}, wire.Draining)
	if c.stat("draining") != "true" || !e.Draining() {
		t.Fatal("draining not reported")
	}
	c.want(wire.Command{Verb: wire.Delete, ID: 1}, wire.Deleted) // the rest still works
	e.SetDraining(false)
	if id := c.put(0, 0, 1, "y"); id != 3 {
		t.Fatalf("id after drain %d, want 3 (a DRAINING put uses up an id, as in beanstalkd)", id)
	}
	if got := c.stat("cmd-put"); got != "4" {
		t.Fatalf("cmd-put %s", got)
	}
	if got := c.stat("total-jobs"); got != "2" {
		t.Fatalf("total-jobs %s", got)
	}
}

func TestRejectPut(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	c.s.RejectPut(wire.JobTooBig)
	c.s.RejectPut(wire.BadFormat) // not a put as far as the engine knows
	if c.stat("current-producers") != "0" {
		t.Fatal("JOB_TOO_BIG made a producer")
	}
	c.s.RejectPut(wire.ExpectedCRLF)
	if got := c.put(0, 0, 1, "x"); got != 2 {
		t.Fatalf("id after EXPECTED_CRLF %d, want 2 (beanstalkd burns an id)", got)
	}
	m := c.statsMap(wire.Command{Verb: wire.Stats})
	if m["cmd-put"] != "3" || m["current-producers"] != "1" || m["total-jobs"] != "1" {
		t.Fatalf("stats after rejected puts: %v", m)
	}
}

func TestBodyIsCopied(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	buf := []byte("abc\r\ndef")
	cmd := wire.Command{Verb: wire.Put, TTR: 1, Body: buf}
	var r wire.Reply
	c.s.Exec(&cmd, &r)
	buf[0] = 'X'
	if _, body := c.reserveNow(); body != "abc\r\ndef" {
		t.Fatalf("body %q: the engine kept the caller's buffer", body)
	}
}

func TestUnknownVerb(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	c.want(wire.Command{Verb: 200}, wire.UnknownCommand)
}
