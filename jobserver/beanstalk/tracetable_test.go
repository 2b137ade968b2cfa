package beanstalk

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// countTraces counts the traces e's job table keeps, checking each page's
// count of traced jobs against its slots and the jobs' flags.
func countTraces(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return tableTraces(nil, &e.jobs)
}

// tableTraces is countTraces on a bare table; t nil panics on a mismatch.
func tableTraces(t *testing.T, tab *jobTable) int {
	fail := func(format string, args ...any) {
		if t == nil {
			panic("trace table: " + format)
		}
		t.Helper()
		t.Fatalf(format, args...)
	}
	if tp := tab.spareTraces; tp != nil && *tp != (tracePage{}) {
		fail("the spare trace page is not all zero")
	}
	for _, p := range tab.pages {
		if p.traces != nil && p.traces == tab.spareTraces {
			fail("a page holds the spare trace page")
		}
	}
	n := len(tab.traceMap)
	for id := range tab.traceMap {
		j := tab.get(id)
		if j == nil || !j.traced {
			fail("mapped trace of job %d, which is not a traced job", id)
		}
		if p := tab.pages[id>>pageBits]; p != nil && p.jobs[id&pageMask] == j && p.traces != nil {
			fail("job %d has a mapped trace and a slot", id)
		}
	}
	for _, p := range tab.pages {
		traced := 0
		for i, j := range p.jobs {
			switch {
			case j != nil && j.traced:
				traced++
				_, mapped := tab.traceMap[j.id]
				if p.traces == nil && !mapped {
					fail("traced job %d of a page without slots has no mapped trace", j.id)
				}
				if p.traces != nil && p.traces[i].creation == (Creation{}) {
					fail("traced job %d has an empty slot", j.id)
				}
			case p.traces != nil && p.traces[i] != (jobTrace{}):
				fail("slot %d holds a trace without a traced job", i)
			}
		}
		if traced != p.traced {
			fail("page counts %d traced jobs, holds %d", p.traced, traced)
		}
		if p.traces == nil && traced >= traceSlotsAt {
			fail("page with %d traced jobs has no slots", traced)
		}
		if p.traces != nil {
			n += traced
		}
	}
	return n
}

// TestTraceTable checks the traces kept in the job table against a map
// through random traced and untraced puts and deletes, with pages that
// drain, go sparse and move their jobs and traces to the overflow maps.
func TestTraceTable(t *testing.T) {
	tab := newJobTable()
	ref := map[uint64]*job{}
	refTrace := map[uint64]Creation{}
	rng := rand.New(rand.NewPCG(3, 4))
	var next uint64 = 1
	check := func() {
		t.Helper()
		for id := uint64(1); id < next; id++ {
			j := tab.get(id)
			if j != ref[id] {
				t.Fatalf("get(%d) = %p, want %p", id, j, ref[id])
			}
			if j == nil {
				continue
			}
			tr := tab.traceOf(j)
			c, traced := refTrace[id]
			switch {
			case traced && (tr == nil || tr.creation != c || tr.ready != int64(id)):
				t.Fatalf("traceOf(%d) = %+v, want %x ready %d", id, tr, c, id)
			case !traced && tr != nil:
				t.Fatalf("untraced job %d has trace %+v", id, tr)
			}
		}
		if n := tableTraces(t, &tab); n != len(refTrace) {
			t.Fatalf("table holds %d traces, want %d", n, len(refTrace))
		}
	}
	for round := range 20 {
		for range 3000 {
			j := &job{id: next}
			next++
			tab.add(j)
			ref[j.id] = j
			// Rounds alternate dense and sparse tracing, so that pages
			// both take slots and keep their few traces in the map.
			if rng.IntN([]int{3, 40}[round%2]) == 0 {
				c := testCreation(byte(j.id) | 1)
				tab.setTrace(j, c)
				tab.traceOf(j).ready = int64(j.id)
				refTrace[j.id] = c
			}
		}
		for id, j := range ref {
			if rng.IntN(10) < 8 || round%5 == 4 {
				tab.clearTrace(j)
				tab.remove(id)
				delete(ref, id)
				delete(refTrace, id)
			}
		}
		check()
	}
	for id, j := range ref {
		tab.clearTrace(j)
		tab.remove(id)
	}
	if len(tab.traceMap) != 0 {
		t.Fatalf("empty table keeps %d mapped traces", len(tab.traceMap))
	}
	for n, p := range tab.pages {
		if p.traced != 0 || p.traces != nil && n < tab.maxID>>pageBits {
			t.Fatalf("issued empty page %d keeps its trace slots (%d traced)", n, p.traced)
		}
	}
	if tab.spareTraces == nil {
		t.Fatal("no trace page kept for reuse")
	}
}

// TestTracesNotAllocatedUntraced checks that an engine whose jobs are not
// traced gives no page trace slots, that a page with a few traced jobs
// gets none either, and that a traced put allocates no more than an
// untraced one once its page has them.
func TestTracesNotAllocatedUntraced(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	cmd := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}
	var r wire.Reply
	for range 3 * pageSize {
		c.s.Exec(&cmd, &r)
	}
	for n, p := range e.jobs.pages {
		if p.traces != nil {
			t.Fatalf("page %d of untraced jobs has trace slots", n)
		}
	}
	for range traceSlotsAt - 1 {
		c.s.SetCreation(testCreation(5))
		c.s.Exec(&cmd, &r)
	}
	if p := e.jobs.pages[e.jobs.maxID>>pageBits]; p.traces != nil || p.traced != traceSlotsAt-1 {
		t.Fatalf("page with %d traced jobs has slots: %v", p.traced, p.traces != nil)
	}
	for range traceSlotsAt { // the page's slots
		c.s.SetCreation(testCreation(5))
		c.s.Exec(&cmd, &r)
	}
	plain := testing.AllocsPerRun(200, func() { c.s.Exec(&cmd, &r) })
	traced := testing.AllocsPerRun(200, func() {
		c.s.SetCreation(testCreation(5))
		c.s.Exec(&cmd, &r)
	})
	if traced > plain {
		t.Fatalf("traced put: %.1f allocations, untraced %.1f", traced, plain)
	}
}

// TestReservedTrace checks that the trace a reservation notes for
// ReservedTrace is what JobTrace says at that moment, for a reserve
// answered at once, one that waited, reserve-job and a retry after a TTR
// expiry, and that an untraced reservation gives none.
func TestReservedTrace(t *testing.T) {
	e, fc := newTestEngine(t)
	p := newConn(t, e)
	w := newConn(t, e)
	same := func(id uint64) {
		t.Helper()
		got, ok := w.s.ReservedTrace(id)
		want, wantOK := e.JobTrace(id)
		if ok != wantOK || got != want {
			t.Fatalf("ReservedTrace(%d) = %+v, %v; JobTrace %+v, %v", id, got, ok, want, wantOK)
		}
	}
	p.s.SetCreation(testCreation(3))
	traced := p.put(1, 0, 5, "traced")
	id, _ := w.reserveNow()
	same(id)
	if _, ok := w.s.ReservedTrace(id + 1); ok {
		t.Fatal("ReservedTrace of another id")
	}
	fc.Advance(6 * time.Second) // TTR runs out at 5 s: ready again, reserved again
	id, _ = w.reserveNow()
	if jt, _ := w.s.ReservedTrace(id); id != traced || jt.Reserves != 2 || !jt.Ready.Equal(testStart.Add(5*time.Second)) {
		t.Fatalf("retry: %+v", jt)
	}
	same(id)

	plain := p.put(1, 0, 5, "plain")
	w.id(wire.ReserveJob, plain)
	if _, ok := w.s.ReservedTrace(plain); ok {
		t.Fatal("untraced reservation has a trace")
	}
	w.want(wire.Command{Verb: wire.Release, ID: traced, Pri: 1, Delay: 0}, wire.Released)
	w.id(wire.ReserveJob, traced)
	same(traced)

	w.want(wire.Command{Verb: wire.Delete, ID: traced}, wire.Deleted)
	w.want(wire.Command{Verb: wire.Delete, ID: plain}, wire.Deleted)
	w.startReserve()
	p.s.SetCreation(testCreation(4))
	p.put(7, 0, 5, "waited for")
	r := w.mustResult(wire.Reserved)
	same(r.ID)
	if jt, _ := w.s.ReservedTrace(r.ID); jt.Creation != testCreation(4) || jt.Tube != "default" || jt.BodySize != 10 {
		t.Fatalf("waited reserve: %+v", jt)
	}
}

// TestReservedTraceConcurrent runs traced producers and waiting consumers
// on their own goroutines (under -race: the trace noted by another
// goroutine's put is read after Result without the engine lock) and checks
// every reservation's trace.
func TestReservedTraceConcurrent(t *testing.T) {
	e := mustNew(Config{})
	defer e.Close()
	const producers, consumers, perProducer = 2, 2, 500
	var wg sync.WaitGroup
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := e.NewSession(nil)
			defer s.Close()
			var r wire.Reply
			for n := range perProducer {
				b := byte(i*perProducer+n)%250 + 1
				traced := byte(n % 2) // the body's second byte says
				if traced == 1 {
					s.SetCreation(testCreation(b))
				}
				s.Exec(&wire.Command{Verb: wire.Put, Pri: uint32(b), TTR: 60, Body: []byte{b, traced}}, &r)
			}
		}()
	}
	errs := make(chan string, consumers)
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wake := make(chan struct{}, 1)
			s := e.NewSession(func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
			defer s.Close()
			for range producers * perProducer / consumers {
				var r wire.Reply
				if !s.Exec(&wire.Command{Verb: wire.Reserve}, &r) {
					for !s.Result(&r) {
						<-wake
					}
				}
				b, traced := r.Body[0], r.Body[1] == 1
				jt, ok := s.ReservedTrace(r.ID)
				if ok != traced || ok && (jt.Creation != testCreation(b) || jt.BodySize != 2 || jt.Reserves != 1) {
					errs <- fmt.Sprintf("job %d (traced %v): trace %+v, %v", r.ID, traced, jt, ok)
					return
				}
				s.Exec(&wire.Command{Verb: wire.Delete, ID: r.ID}, &r)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := countTraces(e); n != 0 {
		t.Fatalf("%d traces left after every job was deleted", n)
	}
}

// TestTracedCycleTakesSlots checks that a page whose jobs are all traced
// but few at a time, as in a cycle of put, reserve and delete, gets trace
// slots once it was given traceSlotsAt traced jobs, so that a traced cycle
// then allocates no more than an untraced one; that the next page takes
// the spare slots at once, the emptied page gone; and that a page given
// fewer traced jobs keeps them in the map.
func TestTracedCycleTakesSlots(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	put := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}
	res := wire.Command{Verb: wire.Reserve}
	var r wire.Reply
	cycle := func(traced bool) {
		if traced {
			c.s.SetCreation(testCreation(5))
		}
		c.s.Exec(&put, &r)
		c.s.Exec(&res, &r)
		del := wire.Command{Verb: wire.Delete, ID: r.ID}
		if c.s.Exec(&del, &r); r.Kind != wire.Deleted {
			t.Fatalf("delete: %v", r.Kind)
		}
	}
	for range traceSlotsAt - 1 {
		cycle(true)
	}
	if p := e.jobs.pages[e.jobs.maxID>>pageBits]; p.traces != nil || len(e.jobs.traceMap) != 0 {
		t.Fatalf("page given %d traced jobs has slots: %v", p.tracedAdded, p.traces != nil)
	}
	cycle(true)
	if p := e.jobs.pages[e.jobs.maxID>>pageBits]; p.traces == nil {
		t.Fatalf("page given %d traced jobs, %d left, has no slots", p.tracedAdded, p.traced)
	}
	plain := testing.AllocsPerRun(200, func() { cycle(false) })
	traced := testing.AllocsPerRun(200, func() { cycle(true) })
	if traced > plain {
		t.Fatalf("traced cycle: %.1f allocations, untraced %.1f", traced, plain)
	}
	for e.jobs.maxID&pageMask != pageMask { // to the end of the page
		cycle(true)
	}
	cycle(true) // the next page's first job: the previous page's slots, given back, are the spare
	if p := e.jobs.pages[e.jobs.maxID>>pageBits]; p.traces == nil || len(e.jobs.traceMap) != 0 {
		t.Fatalf("next page: slots %v, %d mapped traces", p.traces != nil, len(e.jobs.traceMap))
	}
	if n := countTraces(e); n != 0 {
		t.Fatalf("%d traces left", n)
	}
	if n := len(e.jobs.pages); n != 1 {
		t.Fatalf("the table keeps %d pages, not only the one being filled", n)
	}
}
