package gearman

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
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

// returns records a TraceHook's calls.
type returns []string

func (r *returns) JobReturned(id uint64, why ReturnReason) {
	*r = append(*r, why.String())
}

// TestTraceKeptWithJob checks that a submit's creation context is kept
// only when given, that LastJob names the submitted and the grabbed job,
// that runs ending without WORK_* reach the hook, and that a finished
// job's trace is forgotten and recycled.
func TestTraceKeptWithJob(t *testing.T) {
	h := newHarness(t, Config{})
	var ret returns
	h.e.SetTraceHook(&ret)
	c := h.open()
	plain := c.submit(codec.SubmitJobBg, "f", "", "plain")
	c.s.SetCreation(testCreation(3))
	traced := c.submit(codec.SubmitJobBg, "f", "u1", "traced")
	id, ok := h.e.JobID([]byte(traced))
	if !ok || c.s.LastJob() != id || string(h.e.AppendHandle(nil, id)) != traced {
		t.Fatalf("JobID(%s) = %d %v, LastJob %d", traced, id, ok, c.s.LastJob())
	}
	pid, _ := h.e.JobID([]byte(plain))
	if _, ok := h.e.JobTrace(pid); ok || h.tracedJobs() != 1 {
		t.Fatalf("untraced job traced; %d traced jobs", h.tracedJobs())
	}
	jt, ok := h.e.JobTrace(id)
	if !ok || jt.Creation != testCreation(3) || jt.Function != "f" || jt.Unique != "u1" ||
		jt.Attempt != 1 || jt.BodySize != 6 || !jt.Ready.Equal(epoch0) {
		t.Fatalf("JobTrace = %+v, %v", jt, ok)
	}

	w := h.open()
	w.send(codec.CanDoTimeout, "f", "1000")
	w.send(codec.GrabJob) // plain first
	w.rec.take()
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + traced + " f traced")
	if w.s.LastJob() != id || !w.s.LastJobTraced() {
		t.Fatalf("LastJob after grab %d (traced %v), want %d", w.s.LastJob(), w.s.LastJobTraced(), id)
	}
	h.clk.Advance(2 * time.Second) // both time out; only the traced one is reported
	if len(ret) != 1 || ret[0] != "timeout" {
		t.Fatalf("returns %v", ret)
	}
	w.send(codec.GrabJob)
	w.send(codec.GrabJob)
	w.rec.take()
	w.close()
	if len(ret) != 2 || ret[1] != "worker_lost" {
		t.Fatalf("returns %v", ret)
	}
	jt, _ = h.e.JobTrace(id)
	if jt.Attempt != 3 || !jt.Ready.Equal(epoch0.Add(2*time.Second)) {
		t.Fatalf("after two failed runs: %+v", jt)
	}
	w = h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.send(codec.GrabJob)
	w.rec.take()
	w.send(codec.WorkComplete, traced, "")
	if h.tracedJobs() != 0 || len(h.e.freeExts) != 1 {
		t.Fatalf("%d traced jobs after completion, %d exts recycled", h.tracedJobs(), len(h.e.freeExts))
	}
	c.send(codec.SubmitJob, "f", "", "x")
	if c.s.LastJob() == 0 || c.s.LastError() != "" {
		t.Fatalf("LastJob %d LastError %q", c.s.LastJob(), c.s.LastError())
	}
	c.send(codec.SubmitJob, "f", string(make([]byte, 65)), "x")
	if c.s.LastJob() != 0 || c.s.LastError() != "ARGUMENT_TOO_LARGE" {
		t.Fatalf("LastJob %d LastError %q", c.s.LastJob(), c.s.LastError())
	}
}

// TestTraceJournaled checks that a traced background job's creation
// context survives a restart.
func TestTraceJournaled(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(epoch0)
	h, crash, _ := openJournaled(t, dir, clk)
	c := h.open()
	plain := c.submit(codec.SubmitJobBg, "f", "", "plain")
	c.s.SetCreation(testCreation(5))
	traced := c.submit(codec.SubmitJobBg, "f", "", "traced")
	crash()

	h2, _, _ := openJournaled(t, dir, clk)
	pid, _ := h2.e.JobID([]byte(plain))
	id, _ := h2.e.JobID([]byte(traced))
	if _, ok := h2.e.JobTrace(pid); ok {
		t.Fatal("untraced job traced after restart")
	}
	if jt, ok := h2.e.JobTrace(id); !ok || jt.Creation != testCreation(5) || jt.BodySize != 6 {
		t.Fatalf("after restart: %+v %v", jt, ok)
	}
}

// TestTracedJobMemory measures the heap of a queued 100-byte background
// job without and with a creation context: tracing off must cost nothing
// per job (the job struct stays 112 bytes, a size class), and a traced
// job pays for its 48-byte trace only.
func TestTracedJobMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 2×100k jobs")
	}
	perJob := func(traced bool) float64 {
		e, _ := New(Config{HandlePrefix: "H:bench"})
		defer e.Stop()
		c := e.NewSession(SessionInfo{}, &discard{})
		submit := req(codec.SubmitJobBg, []byte("f"), nil, make([]byte, 100))
		const n = 100000
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < n; i++ {
			if traced {
				c.SetCreation(testCreation(byte(i) | 1))
			}
			c.Handle(submit)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(e)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	plain, traced := perJob(false), perJob(true)
	t.Logf("queued 100-byte background job: %.0f bytes untraced, %.0f traced", plain, traced)
	if plain > 450 {
		t.Errorf("%.0f bytes per untraced job, want <= 450", plain)
	}
	if traced-plain > 64 {
		t.Errorf("tracing adds %.0f bytes per job, want <= 64", traced-plain)
	}
	if unsafe.Sizeof(job{}) != 112 || unsafe.Sizeof(jobExt{}) != 48 {
		t.Errorf("job %d bytes, want 112; jobExt %d, want 48", unsafe.Sizeof(job{}), unsafe.Sizeof(jobExt{}))
	}
}

// waits records the queue waits an Observer sees.
type waits []time.Duration

func (w *waits) JobSubmitted(string)                  {}
func (w *waits) JobStarted(_ string, d time.Duration) { *w = append(*w, d) }
func (w *waits) JobCompleted(string, time.Duration)   {}
func (w *waits) JobFailed(string, time.Duration)      {}

// TestTraceReadyWithObserver: with an observer, a traced job's ready time
// agrees with the wait the observer sees.
func TestTraceReadyWithObserver(t *testing.T) {
	h := newHarness(t, Config{})
	var w waits
	h.e.SetObserver(&w)
	c := h.open()
	h.clk.Advance(time.Second)
	c.s.SetCreation(testCreation(4))
	id, _ := h.e.JobID([]byte(c.submit(codec.SubmitJobBg, "f", "", "x")))
	jt, ok := h.e.JobTrace(id)
	if want := epoch0.Add(time.Second); !ok || !jt.Ready.Equal(want) {
		t.Fatalf("Ready %v, want %v (%v)", jt.Ready, want, ok)
	}
	h.clk.Advance(2 * time.Second)
	wk := h.open()
	wk.send(codec.CanDo, "f")
	wk.send(codec.GrabJob)
	wk.rec.take()
	if len(w) != 1 || w[0] != 2*time.Second {
		t.Fatalf("observer waits %v, want [2s]", w)
	}
}

// tracedJobs counts the engine's traced jobs.
func (h *harness) tracedJobs() int {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	n := 0
	for _, j := range h.e.jobs {
		if j.trace() != nil {
			n++
		}
	}
	return n
}
