package tracing

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// gateExporter counts what it exports and holds each export until the
// test releases it, so the test decides when the export goroutine is busy.
type gateExporter struct {
	n       atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func (e *gateExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	select {
	case e.entered <- struct{}{}:
	default:
	}
	<-e.release
	e.n.Add(int64(len(s)))
	return nil
}

func (*gateExporter) Shutdown(context.Context) error { return nil }

// pollUntil fails the test unless cond holds within 10 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// exportThreadIdle reports whether p's export thread is bound and in the
// SCHED_IDLE class, by asking the kernel.
func exportThreadIdle(t *testing.T, p *Provider) bool {
	t.Helper()
	tid := p.lean.prio.tid.Load()
	if tid == 0 {
		return false
	}
	idle, err := threadIdle(int(tid))
	if err != nil {
		t.Fatalf("sched_getscheduler(%d): %v", tid, err)
	}
	return idle
}

// TestExportThreadIdleClass: the export goroutine runs on a SCHED_IDLE
// thread; a queue half full raises it to the normal class from the data
// path, it lowers itself once caught up, no span is lost on the way, and
// its thread ends with Shutdown, so no other goroutine runs idle-class.
func TestExportThreadIdleClass(t *testing.T) {
	clearEnv(t)
	t.Setenv(exportPriorityEnv, "idle")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
	if !exportPriorityAllowed() {
		t.Skip("this process may not raise a thread out of SCHED_IDLE (needs CAP_SYS_NICE or RLIMIT_NICE 20)")
	}
	exp := &gateExporter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	p, err := New(context.Background(), Config{Enabled: true, QueueSize: 2048}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(exp.release)
		}
		p.Shutdown(context.Background())
	}()
	pollUntil(t, "the export thread is not SCHED_IDLE", func() bool { return exportThreadIdle(t, p) })
	tid := p.lean.prio.tid.Load()

	tr := p.Tracer(Beanstalk)
	end := func(n int) {
		for range n {
			tr.StartSend(context.Background(), Message{Destination: "t"}).End()
		}
	}
	// The first batch (512 spans) wakes the export goroutine, which then
	// waits in the exporter.
	end(512)
	select {
	case <-exp.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first batch was not exported")
	}
	if !exportThreadIdle(t, p) {
		t.Fatal("the export thread left SCHED_IDLE below the raise mark")
	}
	// raiseAt is max(batch, limit/2) = 1024: the queue's 1024th span
	// raises.
	end(1023)
	if !exportThreadIdle(t, p) || p.lean.prio.raised.Load() != 0 {
		t.Fatal("raised before the queue reached its mark")
	}
	end(1)
	if exportThreadIdle(t, p) {
		t.Fatal("a queue at its raise mark left the export thread SCHED_IDLE")
	}
	if n := p.lean.prio.raised.Load(); n != 1 {
		t.Fatalf("raised %d times, want 1", n)
	}
	close(exp.release)
	released = true
	pollUntil(t, "the export goroutine did not catch up", func() bool { return exp.n.Load() == 1536 })
	pollUntil(t, "the caught-up export thread did not go back to SCHED_IDLE", func() bool { return exportThreadIdle(t, p) })
	if d := p.Dropped(); d != 0 {
		t.Fatalf("%d spans dropped", d)
	}

	// Shutdown raises the thread and flushes what is queued.
	end(5)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := exp.n.Load(); n != 1541 {
		t.Fatalf("%d spans exported after Shutdown, want 1541", n)
	}
	task := "/proc/self/task/" + strconv.Itoa(int(tid))
	pollUntil(t, "the export thread outlived its goroutine", func() bool {
		_, err := os.Stat(task)
		return os.IsNotExist(err)
	})
}

// TestExportThreadNormalClass: by default, and with
// JOBGATE_TRACING_EXPORT_PRIORITY=normal, the export goroutine stays
// unbound, in the normal class, and spans are exported as before.
func TestExportThreadNormalClass(t *testing.T) {
	for _, v := range []string{"", "normal"} {
		t.Run("env="+v, func(t *testing.T) { testExportThreadNormal(t, v) })
	}
}

func testExportThreadNormal(t *testing.T, env string) {
	clearEnv(t)
	t.Setenv(exportPriorityEnv, env)
	exp := &countExporter{}
	p, err := New(context.Background(), Config{Enabled: true, QueueSize: 4}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	tr := p.Tracer(Gearman)
	for range 4 {
		tr.StartSend(context.Background(), Message{Destination: "f"}).End()
	}
	waitExported(t, exp, 4)
	if tid := p.lean.prio.tid.Load(); tid != 0 {
		t.Fatalf("export thread %d bound with the priority switched off", tid)
	}
	if p.lean.prio.low.Load() {
		t.Fatal("export thread marked idle-class with the priority switched off")
	}
}
