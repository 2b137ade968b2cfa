package tracing

import (
	"context"
	"testing"
	"time"
)

// waitExported polls until exp has exported n spans, failing after a
// deadline well under the schedule delay the test set.
func waitExported(t *testing.T, exp *countExporter, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for exp.n.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d spans exported after 5s, want %d", exp.n.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLeanQueueExportsFullBatches: a full batch is exported at once, without
// a flush and long before the schedule delay; a partial batch waits.
func TestLeanQueueExportsFullBatches(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
	exp := &countExporter{}
	p, err := New(context.Background(), Config{Enabled: true, QueueSize: 4}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	tr := p.Tracer(Beanstalk)
	for range 3 {
		tr.StartSend(context.Background(), Message{Destination: "t"}).End()
	}
	if n := exp.n.Load(); n != 0 {
		t.Fatalf("%d spans of a partial batch exported before the schedule delay", n)
	}
	tr.StartSend(context.Background(), Message{Destination: "t"}).End()
	waitExported(t, exp, 4)
	if p.Dropped() != 0 {
		t.Fatalf("Dropped = %d", p.Dropped())
	}
}

// TestLeanQueueScheduleDelay: a partial batch goes out by itself after
// OTEL_BSP_SCHEDULE_DELAY.
func TestLeanQueueScheduleDelay(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	exp := &countExporter{}
	p, err := New(context.Background(), Config{Enabled: true}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	p.Tracer(Gearman).StartSend(context.Background(), Message{Destination: "f"}).Created("H:1")
	waitExported(t, exp, 1)
}

// TestLeanBatchSize: job spans go out in batches of
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512 when unset, never larger than the
// queue (a batch must be able to fill).
func TestLeanBatchSize(t *testing.T) {
	for _, c := range []struct {
		env   string
		queue int
		want  int
	}{
		{"", DefaultQueueSize, 512},
		{"", 100, 100},
		{"1000", DefaultQueueSize, 1000},
		{"1000", 200, 200},
		{"-1", DefaultQueueSize, 512},
		{"x", DefaultQueueSize, 512},
	} {
		t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", c.env)
		p := newLeanPipe(nil, leanEncoder{}, discardSink{}, c.queue, true)
		if p.batch != c.want {
			t.Errorf("OTEL_BSP_MAX_EXPORT_BATCH_SIZE=%q, queue %d: batch %d, want %d", c.env, c.queue, p.batch, c.want)
		}
	}
}
