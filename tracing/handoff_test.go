package tracing

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestHandoffOrderAndFlush ends spans in a batch and a partial one: a
// ForceFlush exports every span in the order they ended, and a partial
// batch also goes out by itself within the handoff interval.
func TestHandoffOrderAndFlush(t *testing.T) {
	clearEnv(t)
	ctx := context.Background()
	exp := &keepExporter{}
	p, err := New(ctx, Config{Enabled: true, ServiceName: "unit", QueueSize: 1000}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	// The handoff serves the SDK path (command spans, other libraries);
	// job spans take the lean path, which has its own queue.
	tr := p.TracerProvider().Tracer("handoff-test")
	end := func(name string) {
		_, s := tr.Start(ctx, name)
		s.End()
	}
	n := handoffBatch + handoffBatch/2
	for i := range n {
		end("send " + fmt.Sprint(i))
	}
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	got := exp.get()
	if len(got) != n {
		t.Fatalf("exported %d spans, want %d", len(got), n)
	}
	for i, s := range got {
		if want := "send " + fmt.Sprint(i); s.Name != want {
			t.Fatalf("span %d is %q, want %q", i, s.Name, want)
		}
	}
	// A lone span reaches the SDK processor within handoffEvery; its own
	// ForceFlush then exports it without the handoff's help.
	end("send late")
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.proc.hand.mu.Lock()
		left := len(p.proc.hand.buf)
		p.proc.hand.mu.Unlock()
		if left == 0 {
			// Wait for a hand-over in progress to finish.
			p.proc.hand.passMu.Lock()
			//lint:ignore SA2001 taking the lock is the wait
			p.proc.hand.passMu.Unlock()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a partial batch stayed in the handoff")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.proc.SpanProcessor.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := exp.get(); len(got) != n+1 || got[n].Name != "send late" {
		t.Fatalf("after the interval: %d spans", len(got))
	}
}
