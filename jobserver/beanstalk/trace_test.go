package beanstalk

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// testCreation is a creation context with recognisable bytes.
func testCreation(b byte) Creation {
	var c Creation
	for i := 1; i < len(c); i++ {
		c[i] = b
	}
	c[25] = 1
	return c
}

// traceEvents records a TraceHook's calls.
type traceEvents struct{ timedOut, abandoned []uint64 }

func (h *traceEvents) JobTimedOut(id uint64, _ int)  { h.timedOut = append(h.timedOut, id) }
func (h *traceEvents) JobAbandoned(id uint64, _ int) { h.abandoned = append(h.abandoned, id) }

// TestTraceKeptWithJob checks that a put's creation context is kept with
// the job only when given, follows it through release and TTR expiry, and
// is forgotten at delete.
func TestTraceKeptWithJob(t *testing.T) {
	e, fc := newTestEngine(t)
	h := &traceEvents{}
	e.SetTraceHook(h)
	c := newConn(t, e)
	plain := c.put(1, 0, 5, "plain")
	c.s.SetCreation(testCreation(7))
	traced := c.put(1, 0, 5, "traced")
	if _, ok := e.JobTrace(plain); ok {
		t.Fatal("untraced job has a trace")
	}
	if n := countTraces(e); n != 1 {
		t.Fatalf("%d traces kept, want 1", n)
	}
	w := newConn(t, e)
	w.id(wire.ReserveJob, traced)
	jt, ok := e.JobTrace(traced)
	if !ok || jt.Creation != testCreation(7) || jt.Tube != "default" || jt.Reserves != 1 || jt.BodySize != 6 {
		t.Fatalf("JobTrace = %+v, %v", jt, ok)
	}
	if !jt.Ready.Equal(testStart) {
		t.Fatalf("ready %v, want %v", jt.Ready, testStart)
	}
	fc.Advance(6 * time.Second) // TTR runs out
	if len(h.timedOut) != 1 || h.timedOut[0] != traced {
		t.Fatalf("timed out %v, want [%d]", h.timedOut, traced)
	}
	w.id(wire.ReserveJob, plain) // untraced: no hook call when abandoned
	w.id(wire.ReserveJob, traced)
	w.s.Close()
	if len(h.abandoned) != 1 || h.abandoned[0] != traced {
		t.Fatalf("abandoned %v, want [%d]", h.abandoned, traced)
	}
	jt, _ = e.JobTrace(traced)
	if jt.Reserves != 2 || !jt.Ready.Equal(testStart.Add(6*time.Second)) {
		t.Fatalf("after retry: %+v", jt)
	}
	c.want(wire.Command{Verb: wire.Delete, ID: traced}, wire.Deleted)
	if n := countTraces(e); n != 0 {
		t.Fatalf("%d traces kept after delete, want 0", n)
	}
}

// TestTraceJournaled checks that a traced job's creation context survives a
// restart, through an Update of its record, next to an untraced job.
func TestTraceJournaled(t *testing.T) {
	dir := t.TempDir()
	in := openDurable(t, dir, testStart, journal.Options{Sync: journal.Always})
	c := newConn(t, in.e)
	plain := c.put(1, 0, 30, "plain")
	c.s.SetCreation(testCreation(9))
	traced := c.put(1, 0, 30, "traced body")
	w := newConn(t, in.e)
	w.id(wire.ReserveJob, traced)
	w.want(wire.Command{Verb: wire.Release, ID: traced, Pri: 3, Delay: 0}, wire.Released)
	in.stop()

	in = openDurable(t, dir, testStart.Add(time.Minute), journal.Options{})
	if _, ok := in.e.JobTrace(plain); ok {
		t.Fatal("untraced job has a trace after restart")
	}
	jt, ok := in.e.JobTrace(traced)
	if !ok || jt.Creation != testCreation(9) || jt.BodySize != len("traced body") {
		t.Fatalf("after restart: %+v, %v", jt, ok)
	}
	c = newConn(t, in.e)
	r := c.id(wire.ReserveJob, traced)
	if string(r.Body) != "traced body" {
		t.Fatalf("body %q", r.Body)
	}
}

// TestTraceBuriedAfterRestart: a traced job buried before a restart has
// not become ready since, so its queue wait is unknown: a reserve-job of
// it after the restart gives the zero Ready (no wait attribute), not the
// Unix epoch.
func TestTraceBuriedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	in := openDurable(t, dir, testStart, journal.Options{Sync: journal.Always})
	c := newConn(t, in.e)
	c.s.SetCreation(testCreation(9))
	id := c.put(1, 0, 30, "buried")
	c.id(wire.ReserveJob, id)
	c.want(wire.Command{Verb: wire.Bury, ID: id, Pri: 1}, wire.Buried)
	in.stop()

	in = openDurable(t, dir, testStart.Add(time.Minute), journal.Options{})
	c = newConn(t, in.e)
	c.id(wire.ReserveJob, id)
	jt, ok := c.s.ReservedTrace(id)
	if !ok || jt.Creation != testCreation(9) || !jt.Ready.IsZero() {
		t.Fatalf("reserve-job of a job buried before the restart: %+v, %v; want its creation and a zero Ready", jt, ok)
	}
	if jt2, _ := in.e.JobTrace(id); !jt2.Ready.IsZero() {
		t.Fatalf("JobTrace Ready %v, want zero", jt2.Ready)
	}
}

// TestTracedJobMemory measures the heap of a queued 100-byte job without
// and with a creation context: tracing off must cost nothing per job (the
// 96-byte job struct does not grow), and a traced job pays for its
// side-map entry only.
func TestTracedJobMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 2×100k jobs")
	}
	// perJob puts 100k jobs, one in every `every` traced (0: none).
	perJob := func(every int) float64 {
		e := mustNew(Config{})
		defer e.Close()
		s := e.NewSession(nil)
		defer s.Close()
		cmd := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: make([]byte, 100)}
		var r wire.Reply
		const n = 100000
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < n; i++ {
			if every > 0 && i%every == 0 {
				s.SetCreation(testCreation(byte(i) | 1))
			}
			s.Exec(&cmd, &r)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(e)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	plain, traced, sampled := perJob(0), perJob(1), perJob(100)
	t.Logf("queued 100-byte job: %.0f bytes untraced, %.0f traced, %.0f with 1 in 100 traced", plain, traced, sampled)
	if unsafe.Sizeof(job{}) != 96 {
		t.Errorf("job struct is %d bytes, want 96", unsafe.Sizeof(job{}))
	}
	if traced-plain > 160 {
		t.Errorf("tracing adds %.0f bytes per job, want <= 160", traced-plain)
	}
	// A few traced jobs must not cost their untraced neighbours a trace
	// slot (40 bytes each): 1 in 100 traced at 160 bytes is 1.6 a job.
	if sampled-plain > 8 {
		t.Errorf("tracing 1 job in 100 adds %.0f bytes per job, want <= 8", sampled-plain)
	}
}
