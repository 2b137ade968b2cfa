package beanstalk

import (
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

func TestPutReserveDelete(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	id := c.put(5, 0, 10, "hello")
	if id != 1 {
		t.Fatalf("first id = %d, want 1", id)
	}
	if c.put(5, 0, 10, "") != 2 {
		t.Fatal("second id is not 2")
	}
	got, body := c.reserveNow()
	if got != 1 || body != "hello" {
		t.Fatalf("reserved %d %q, want 1 hello", got, body)
	}
	if s := c.jobStat(1, "state"); s != "reserved" {
		t.Fatalf("state %q", s)
	}
	c.want(wire.Command{Verb: wire.Delete, ID: 1}, wire.Deleted)
	c.want(wire.Command{Verb: wire.Delete, ID: 1}, wire.NotFound)
	c.want(wire.Command{Verb: wire.Peek, ID: 1}, wire.NotFound)
	if got := c.stat("current-jobs-ready"); got != "1" {
		t.Fatalf("ready = %s", got)
	}
}

func TestReadyOrderPriorityThenID(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	c.put(10, 0, 10, "a") // 1
	c.put(5, 0, 10, "b")  // 2
	c.put(10, 0, 10, "c") // 3
	c.put(5, 0, 10, "d")  // 4
	c.put(0, 0, 10, "e")  // 5
	var order []uint64
	for range 5 {
		id, _ := c.reserveNow()
		order = append(order, id)
	}
	want := []uint64{5, 2, 4, 1, 3}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

func TestReserveAcrossWatchedTubes(t *testing.T) {
	e, _ := newTestEngine(t)
	p := newConn(t, e)
	p.use("a")
	p.put(7, 0, 10, "a7") // 1
	p.use("b")
	p.put(3, 0, 10, "b3") // 2
	p.use("c")
	p.put(1, 0, 10, "c1") // 3 (not watched)
	w := newConn(t, e)
	w.watch("a")
	w.watch("b")
	if id, _ := w.reserveNow(); id != 2 {
		t.Fatalf("reserved %d, want 2 (lowest pri among watched)", id)
	}
	if id, _ := w.reserveNow(); id != 1 {
		t.Fatalf("reserved %d, want 1", id)
	}
	if r, done := w.reserveTimeout(0); !done || r.Kind != wire.TimedOut {
		t.Fatalf("reserve-with-timeout 0: %s done=%v", show(r), done)
	}
}

func TestDelayedJobBecomesReady(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	id := c.put(1, 5, 10, "later")
	if s := c.jobStat(id, "state"); s != "delayed" {
		t.Fatalf("state %q", s)
	}
	if got := c.jobStat(id, "time-left"); got != "4" && got != "5" {
		t.Fatalf("time-left %s", got)
	}
	c.want(wire.Command{Verb: wire.PeekDelayed}, wire.Found)
	c.want(wire.Command{Verb: wire.PeekReady}, wire.NotFound)

	w := newConn(t, e)
	w.startReserve()
	fc.Advance(5*time.Second - time.Nanosecond)
	w.pending()
	fc.Advance(time.Nanosecond)
	r := w.mustResult(wire.Reserved)
	if r.ID != id || string(r.Body) != "later" || w.notified != 1 {
		t.Fatalf("got %s notified=%d", show(r), w.notified)
	}
}

func TestDelayedOrderAndTimerCount(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	for i := range 1000 {
		c.put(0, uint32(1000-i), 10, "x")
	}
	if n := fc.Pending(); n > 1 {
		t.Fatalf("%d clock timers pending for 1000 delayed jobs, want one engine timer", n)
	}
	if r := c.want(wire.Command{Verb: wire.PeekDelayed}, wire.Found); r.ID != 1000 {
		t.Fatalf("peek-delayed = %d, want 1000 (soonest)", r.ID)
	}
	fc.Advance(10 * time.Second)
	if got := c.stat("current-jobs-ready"); got != "10" {
		t.Fatalf("ready after 10s = %s, want 10", got)
	}
	if r := c.want(wire.Command{Verb: wire.PeekReady}, wire.Found); r.ID != 991 {
		t.Fatalf("peek-ready = %d, want 991 (lowest id among pri 0)", r.ID)
	}
}

func TestTTRExpiryReturnsJobToReady(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	id := c.put(1, 0, 3, "x")
	c.reserveNow()
	fc.Advance(3*time.Second - time.Nanosecond)
	if s := c.jobStat(id, "state"); s != "reserved" {
		t.Fatalf("state before TTR %q", s)
	}
	fc.Advance(time.Nanosecond)
	if s := c.jobStat(id, "state"); s != "ready" {
		t.Fatalf("state after TTR %q, want ready", s)
	}
	if got := c.jobStat(id, "timeouts"); got != "1" {
		t.Fatalf("timeouts %s", got)
	}
	if got := c.stat("job-timeouts"); got != "1" {
		t.Fatalf("job-timeouts %s", got)
	}
	c.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted) // ready now: anyone may delete
}

func TestTTRZeroBecomesOne(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	id := c.put(1, 0, 0, "x")
	if got := c.jobStat(id, "ttr"); got != "1" {
		t.Fatalf("ttr %s, want 1", got)
	}
	c.reserveNow()
	fc.Advance(time.Second)
	if s := c.jobStat(id, "state"); s != "ready" {
		t.Fatalf("state %q after 1s", s)
	}
}

func TestDeadlineSoonOnReserve(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 5, "x")
	c.reserveNow()
	fc.Advance(4 * time.Second) // in the last second
	c.want(wire.Command{Verb: wire.Reserve}, wire.DeadlineSoon)
	if r, _ := c.reserveTimeout(10); r.Kind != wire.DeadlineSoon {
		t.Fatalf("reserve-with-timeout: %s", show(r))
	}
	// With another job ready, reserve hands it out instead.
	c.put(1, 0, 5, "y")
	if id, _ := c.reserveNow(); id != 2 {
		t.Fatalf("reserved %d", id)
	}
}

func TestDeadlineSoonWhileWaiting(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 5, "x")
	c.reserveNow()
	c.startReserve()
	fc.Advance(4*time.Second - time.Nanosecond)
	c.pending()
	fc.Advance(time.Nanosecond)
	c.mustResult(wire.DeadlineSoon)
	if c.stat("current-waiting") != "0" {
		t.Fatal("still counted as waiting")
	}
	// The job is still ours until the TTR ends.
	c.want(wire.Command{Verb: wire.Touch, ID: 1}, wire.Touched)
}

func TestReserveWithTimeout(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	if r, done := c.reserveTimeout(0); !done || r.Kind != wire.TimedOut {
		t.Fatalf("timeout 0: %s done=%v", show(r), done)
	}
	if _, done := c.reserveTimeout(3); done {
		t.Fatal("timeout 3 answered at once")
	}
	if c.tubeStat("default", "current-waiting") != "1" || c.notified != 0 {
		t.Fatal("not waiting")
	}
	fc.Advance(3*time.Second - time.Nanosecond)
	c.pending()
	fc.Advance(time.Nanosecond)
	c.mustResult(wire.TimedOut)
	if c.notified != 1 {
		t.Fatalf("notified %d", c.notified)
	}
	// A job arriving later goes to nobody.
	c.put(0, 0, 1, "x")
	if c.stat("current-jobs-ready") != "1" {
		t.Fatal("job not ready")
	}
}

func TestBlockingReserveGetsPut(t *testing.T) {
	e, _ := newTestEngine(t)
	w1 := newConn(t, e)
	w2 := newConn(t, e)
	p := newConn(t, e)
	w1.startReserve()
	w2.startReserve()
	if got := p.stat("current-waiting"); got != "2" {
		t.Fatalf("current-waiting %s", got)
	}
	p.put(0, 0, 10, "one")
	r := w1.mustResult(wire.Reserved) // longest waiter first
	if string(r.Body) != "one" {
		t.Fatalf("body %q", r.Body)
	}
	w2.pending()
	p.put(0, 0, 10, "two")
	w2.mustResult(wire.Reserved)
	if got := p.stat("current-jobs-reserved"); got != "2" {
		t.Fatalf("reserved %s", got)
	}
}

func TestWaiterOnSeveralTubes(t *testing.T) {
	e, _ := newTestEngine(t)
	w := newConn(t, e)
	w.watch("a")
	w.watch("b")
	w.startReserve()
	for _, tb := range []string{"default", "a", "b"} {
		if got := w.tubeStat(tb, "current-waiting"); got != "1" {
			t.Fatalf("%s waiting %s", tb, got)
		}
	}
	p := newConn(t, e)
	p.use("b")
	p.put(0, 0, 10, "x")
	w.mustResult(wire.Reserved)
	for _, tb := range []string{"default", "a", "b"} {
		if got := w.tubeStat(tb, "current-waiting"); got != "0" {
			t.Fatalf("%s waiting %s after reserve", tb, got)
		}
	}
	p.use("a")
	p.put(0, 0, 10, "y")
	if got := p.tubeStat("a", "current-jobs-ready"); got != "1" {
		t.Fatalf("job went to a finished waiter: ready %s", got)
	}
}

func TestBuryKickRules(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 10, "r1")   // 1
	c.put(1, 0, 10, "r2")   // 2
	c.put(1, 100, 10, "d3") // 3
	c.put(1, 50, 10, "d4")  // 4
	c.reserveNow()
	c.reserveNow()
	c.want(wire.Command{Verb: wire.Bury, ID: 2, Pri: 9}, wire.Buried)
	c.want(wire.Command{Verb: wire.Bury, ID: 1, Pri: 8}, wire.Buried)
	if r := c.want(wire.Command{Verb: wire.PeekBuried}, wire.Found); r.ID != 2 {
		t.Fatalf("peek-buried %d, want 2 (first buried)", r.ID)
	}
	if c.jobStat(1, "pri") != "8" || c.jobStat(1, "buries") != "1" {
		t.Fatal("bury did not set pri/buries")
	}
	// Buried jobs first, even with delayed ones present; bound respected.
	if r := c.want(wire.Command{Verb: wire.Kick, Bound: 1}, wire.KickedCount); r.Count != 1 {
		t.Fatalf("kicked %d", r.Count)
	}
	if c.jobStat(2, "state") != "ready" || c.jobStat(1, "state") != "buried" {
		t.Fatal("kick took the wrong job")
	}
	if r := c.want(wire.Command{Verb: wire.Kick, Bound: 10}, wire.KickedCount); r.Count != 1 {
		t.Fatalf("kicked %d, want 1 (only buried)", r.Count)
	}
	if c.jobStat(3, "state") != "delayed" {
		t.Fatal("delayed job kicked with buried present")
	}
	// No buried left: delayed ones, soonest first.
	if r := c.want(wire.Command{Verb: wire.Kick, Bound: 1}, wire.KickedCount); r.Count != 1 {
		t.Fatalf("kicked %d", r.Count)
	}
	if c.jobStat(4, "state") != "ready" || c.jobStat(4, "kicks") != "1" {
		t.Fatal("did not kick the soonest delayed job")
	}
	if r := c.want(wire.Command{Verb: wire.Kick, Bound: 5}, wire.KickedCount); r.Count != 1 {
		t.Fatalf("kicked %d", r.Count)
	}
	if r := c.want(wire.Command{Verb: wire.Kick, Bound: 5}, wire.KickedCount); r.Count != 0 {
		t.Fatalf("kicked %d from nothing", r.Count)
	}
	// The kicked delayed job no longer fires.
	fc.Advance(200 * time.Second)
	if c.stat("current-jobs-ready") != "4" {
		t.Fatal("ready count wrong")
	}
}

func TestKickJob(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 10, "a")  // 1 ready
	c.put(1, 60, 10, "b") // 2 delayed
	c.put(1, 0, 10, "c")  // 3 → reserved → buried
	c.put(1, 0, 10, "d")  // 4 → reserved
	c.want(wire.Command{Verb: wire.ReserveJob, ID: 3}, wire.Reserved)
	c.want(wire.Command{Verb: wire.Bury, ID: 3, Pri: 1}, wire.Buried)
	c.want(wire.Command{Verb: wire.ReserveJob, ID: 4}, wire.Reserved)
	for id, want := range map[uint64]wire.ReplyKind{1: wire.NotFound, 2: wire.Kicked, 3: wire.Kicked, 4: wire.NotFound, 99: wire.NotFound} {
		c.want(wire.Command{Verb: wire.KickJob, ID: id}, want)
	}
	if c.jobStat(2, "state") != "ready" || c.jobStat(3, "state") != "ready" {
		t.Fatal("kick-job did not make jobs ready")
	}
}

func TestOwnership(t *testing.T) {
	e, _ := newTestEngine(t)
	a := newConn(t, e)
	b := newConn(t, e)
	a.put(1, 0, 10, "x") // 1
	a.reserveNow()
	for _, cmd := range []wire.Command{
		{Verb: wire.Release, ID: 1}, {Verb: wire.Bury, ID: 1}, {Verb: wire.Touch, ID: 1},
		{Verb: wire.Delete, ID: 1}, {Verb: wire.KickJob, ID: 1}, {Verb: wire.ReserveJob, ID: 1},
	} {
		b.want(cmd, wire.NotFound)
	}
	b.want(wire.Command{Verb: wire.Peek, ID: 1}, wire.Found) // peek is global
	a.want(wire.Command{Verb: wire.Release, ID: 1, Pri: 3}, wire.Released)
	if a.jobStat(1, "releases") != "1" || a.jobStat(1, "pri") != "3" {
		t.Fatal("release did not count or set pri")
	}
	// Not reserved: release, bury and touch fail even for the previous owner.
	a.want(wire.Command{Verb: wire.Release, ID: 1}, wire.NotFound)
	a.want(wire.Command{Verb: wire.Bury, ID: 1}, wire.NotFound)
	a.want(wire.Command{Verb: wire.Touch, ID: 1}, wire.NotFound)
	// Delete works on ready, delayed and buried jobs from anyone.
	b.want(wire.Command{Verb: wire.Delete, ID: 1}, wire.Deleted)
	a.put(1, 30, 10, "delayed") // 2
	b.want(wire.Command{Verb: wire.Delete, ID: 2}, wire.Deleted)
	a.put(1, 0, 10, "buried") // 3
	a.reserveNow()
	a.want(wire.Command{Verb: wire.Bury, ID: 3}, wire.Buried)
	b.want(wire.Command{Verb: wire.Delete, ID: 3}, wire.Deleted)
	if got := a.tubeStat("default", "cmd-delete"); got != "3" {
		t.Fatalf("tube cmd-delete %s", got)
	}
	if got := a.stat("cmd-delete"); got != "4" {
		t.Fatalf("global cmd-delete %s (counts failures too)", got)
	}
}

func TestReleaseWithDelay(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 10, "x")
	c.reserveNow()
	c.want(wire.Command{Verb: wire.Release, ID: 1, Pri: 2, Delay: 7}, wire.Released)
	if c.jobStat(1, "state") != "delayed" || c.jobStat(1, "delay") != "7" {
		t.Fatal("release with delay did not delay")
	}
	fc.Advance(7 * time.Second)
	if c.jobStat(1, "state") != "ready" {
		t.Fatal("not ready after the delay")
	}
}

func TestTouch(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 10, "x")
	c.reserveNow()
	fc.Advance(8 * time.Second)
	c.want(wire.Command{Verb: wire.Touch, ID: 1}, wire.Touched)
	if got := c.jobStat(1, "time-left"); got != "10" && got != "9" {
		t.Fatalf("time-left after touch %s", got)
	}
	fc.Advance(9 * time.Second)
	if c.jobStat(1, "state") != "reserved" {
		t.Fatal("touch did not extend the TTR")
	}
	fc.Advance(time.Second)
	if c.jobStat(1, "state") != "ready" {
		t.Fatal("TTR did not expire after the touch")
	}
}

func TestReserveJob(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 10, "ready")  // 1
	c.put(1, 30, 10, "delay") // 2
	c.put(1, 0, 10, "buried") // 3
	c.want(wire.Command{Verb: wire.ReserveJob, ID: 3}, wire.Reserved)
	c.want(wire.Command{Verb: wire.Bury, ID: 3}, wire.Buried)
	for _, id := range []uint64{2, 3, 1} {
		r := c.want(wire.Command{Verb: wire.ReserveJob, ID: id}, wire.Reserved)
		if r.ID != id {
			t.Fatalf("reserve-job %d gave %d", id, r.ID)
		}
	}
	c.want(wire.Command{Verb: wire.ReserveJob, ID: 1}, wire.NotFound) // already reserved
	c.want(wire.Command{Verb: wire.ReserveJob, ID: 9}, wire.NotFound)
	if got := c.stat("current-jobs-reserved"); got != "3" {
		t.Fatalf("reserved %s", got)
	}
	if got := c.stat("current-jobs-delayed"); got != "0" {
		t.Fatalf("delayed %s", got)
	}
}
