package beanstalk

import (
	"testing"
	"unsafe"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// slotPages returns the number of e's pages that hold trace slots.
func slotPages(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.jobs.pages {
		if p.traces != nil {
			n++
		}
	}
	return n
}

// TestTraceSlotsNotKeptByBacklog checks that a traced cycle of put,
// reserve and delete next to a backlog of untraced jobs, on another tube,
// leaves trace slots on no page but the one being filled: every page was
// given many traced jobs but holds at most one when the next page starts,
// and the backlog pins the pages. The slots used to stay on every page,
// 40 bytes more for each queued untraced job.
func TestTraceSlotsNotKeptByBacklog(t *testing.T) {
	e, _ := newTestEngine(t)
	backlog := newConn(t, e)
	backlog.use("backlog")
	c := newConn(t, e)
	c.use("cycle")
	c.watch("cycle")
	c.ignore("default")
	put := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}
	var r wire.Reply
	const jobs = 20 * pageSize
	for range jobs {
		backlog.s.Exec(&put, &r)
		c.s.SetCreation(testCreation(5))
		c.s.Exec(&put, &r)
		id, _ := c.reserveNow()
		c.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
	}
	if n := countTraces(e); n != 0 {
		t.Fatalf("%d traces left", n)
	}
	if n := pagesKept(e); n < 2*jobs/pageSize {
		t.Fatalf("the backlog keeps %d pages", n) // else the test proves nothing
	}
	if n := slotPages(e); n > 1 {
		t.Fatalf("%d pages hold trace slots (%d KiB) with no traced job",
			n, n*int(unsafe.Sizeof(tracePage{}))>>10)
	}
}

// TestTraceSlotsNotKeptByFewBuried checks that a traced cycle that buries
// one job in 20 keeps the buried jobs' traces in the map, not in slots of
// every page: each page holds about 50 traced jobs when the next page
// starts, fewer than traceSlotsAt, at 40 KiB of slots a page (800 bytes a
// traced job) against the map's 80 bytes or so.
func TestTraceSlotsNotKeptByFewBuried(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	put := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}
	var r wire.Reply
	const jobs = 20 * pageSize
	buried := 0
	for i := range jobs {
		c.s.SetCreation(testCreation(5))
		c.s.Exec(&put, &r)
		id, _ := c.reserveNow()
		if i%20 == 0 {
			c.want(wire.Command{Verb: wire.Bury, ID: id, Pri: 1}, wire.Buried)
			buried++
		} else {
			c.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
		}
	}
	if n := countTraces(e); n != buried {
		t.Fatalf("%d traces kept, want %d", n, buried)
	}
	if n := slotPages(e); n > 1 {
		t.Fatalf("%d pages hold trace slots (%d KiB) for %d traced jobs",
			n, n*int(unsafe.Sizeof(tracePage{}))>>10, buried)
	}
}

// TestTraceSlotsGivenBackWhenFew checks that a page that kept its slots,
// densely traced when the next page started, gives them back, its traces
// moved to the map, once fewer than half of traceSlotsAt traced jobs are
// left, rather than holding 40 KiB for its last one.
func TestTraceSlotsGivenBackWhenFew(t *testing.T) {
	tab := newJobTable()
	var jobs []*job
	for id := uint64(1); id < pageSize; id++ {
		j := &job{id: id}
		tab.add(j)
		if id%4 == 0 {
			tab.setTrace(j, testCreation(byte(id)|1))
			jobs = append(jobs, j)
		}
	}
	tab.add(&job{id: pageSize}) // the next page
	p := tab.pages[0]
	if p.traces == nil {
		t.Fatalf("page with %d traced jobs gave back its slots", p.traced)
	}
	for _, j := range jobs {
		tab.clearTrace(j)
		tableTraces(t, &tab)
		if p.traced < traceSlotsAt/2 && p.traces != nil {
			t.Fatalf("page with %d traced jobs keeps its slots", p.traced)
		}
		if p.traced >= traceSlotsAt/2 && p.traces == nil {
			t.Fatalf("page with %d traced jobs gave back its slots", p.traced)
		}
	}
	if len(tab.traceMap) != 0 || tab.spareTraces == nil {
		t.Fatalf("%d mapped traces left; spare kept: %v", len(tab.traceMap), tab.spareTraces != nil)
	}
}
