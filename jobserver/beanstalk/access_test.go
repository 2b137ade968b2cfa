package beanstalk

import (
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// TestReserveFilter: a filtered session reserves only from the watched
// tubes the filter passes, at once and while waiting, and a wait that
// skipped tubes is undone cleanly (by a job, by Cancel, by timeout).
func TestReserveFilter(t *testing.T) {
	e, fc := newTestEngine(t)
	p := newConn(t, e)
	w := newConn(t, e)
	w.watch("jobs")
	w.watch("other")
	w.s.SetReserveFilter(func(tube []byte) bool { return string(tube) == "jobs" })
	if !w.s.Reservable() || w.s.Watching() != 3 {
		t.Fatalf("Reservable %v, Watching %d", w.s.Reservable(), w.s.Watching())
	}
	p.put(0, 0, 60, "in default")
	if r, done := w.reserveTimeout(0); !done || r.Kind != wire.TimedOut {
		t.Fatalf("reserve with only a filtered job ready: %s", show(r))
	}

	w.startReserve()
	if got := p.tubeStat("default", "current-waiting"); got != "0" {
		t.Fatalf("default current-waiting %s: the filtered tube is waited on", got)
	}
	if got := p.tubeStat("jobs", "current-waiting"); got != "1" {
		t.Fatalf("jobs current-waiting %s", got)
	}
	p.use("other")
	p.put(0, 0, 60, "in other")
	w.pending()
	p.use("jobs")
	id := p.put(0, 0, 60, "in jobs")
	if r := w.mustResult(wire.Reserved); r.ID != id {
		t.Fatalf("reserved %d, want %d", r.ID, id)
	}
	if got := p.tubeStat("jobs", "current-waiting"); got != "0" {
		t.Fatalf("jobs current-waiting %s after the reserve", got)
	}

	w.startReserve()
	w.s.Cancel()
	w.mustResult(wire.TimedOut)
	if r, done := w.reserveTimeout(1); done {
		t.Fatalf("reserve-with-timeout answered %s at once", show(r))
	}
	fc.Advance(time.Second)
	w.mustResult(wire.TimedOut)

	tube, mine, ok := w.s.JobTube(id)
	if !ok || !mine || string(tube) != "jobs" {
		t.Fatalf("JobTube(reserved) = %q %v %v", tube, mine, ok)
	}
	tube, mine, ok = p.s.JobTube(1)
	if !ok || mine || string(tube) != "default" {
		t.Fatalf("JobTube(other's) = %q %v %v", tube, mine, ok)
	}
	if _, _, ok := p.s.JobTube(999); ok {
		t.Fatal("JobTube of no job reported one")
	}
	if got := string(p.s.Used()); got != "jobs" {
		t.Fatalf("Used %q", got)
	}

	w.s.SetReserveFilter(func([]byte) bool { return false })
	if w.s.Reservable() {
		t.Fatal("Reservable with every tube filtered")
	}
	w.s.SetReserveFilter(nil)
	if r, _ := w.reserveTimeout(0); r.Kind != wire.Reserved || string(r.Body) != "in default" {
		t.Fatalf("unfiltered reserve: %s", show(r))
	}
}
