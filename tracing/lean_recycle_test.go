package tracing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// staleCalls calls every method of a Send and a Process whose spans have
// ended, with values no live span uses.
func staleCalls(s Send, p Process) {
	s.Describe(Message{Operation: "stale", Destination: "stale", ID: "stale"})
	s.Created("stale")
	s.Fail("stale")
	s.End()
	p.Status("stale", "stale")
	p.Data(666)
	p.Warning(666)
	p.Touch()
	p.Complete()
	p.Fail("stale")
	p.Release(666, time.Second)
	p.Bury(666)
	p.TTRExpired()
	p.SetOperationName("stale")
	p.evict()
}

// hasStale reports whether span carries anything staleCalls sets.
func hasStale(span sdktrace.ReadOnlySpan) bool {
	for _, kv := range span.Attributes() {
		if kv.Value.String() == "stale" || kv.Value.String() == "666" {
			return true
		}
	}
	for _, e := range span.Events() {
		for _, kv := range e.Attributes {
			if kv.Value.String() == "stale" || kv.Value.String() == "666" {
				return true
			}
		}
	}
	return span.Status().Description == "stale"
}

// TestLeanRecycledHandlesAreInert: once a job's spans are exported, their
// records serve new spans, and the old Send and Process handles change
// nothing, while still telling their own span contexts.
func TestLeanRecycledHandlesAreInert(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	ctx := context.Background()
	reused := 0
	for i := range 50 {
		s := tr.StartSend(ctx, Message{Operation: "SUBMIT_JOB", Destination: "old"})
		cr := s.Creation()
		s.Created("H:old")
		_, p := tr.StartProcess(ctx, cr, Message{Operation: "JOB_ASSIGN", Destination: "old"})
		psc := p.SpanContext()
		p.Complete()
		old := map[*leanSpan]bool{s.span.(*leanSpan): true, p.span.(*leanSpan): true}

		// New spans, open while the stale handles are used.
		s2 := tr.StartSend(ctx, Message{Operation: "SUBMIT_JOB", Destination: "new"})
		_, p2 := tr.StartProcess(ctx, s2.Creation(), Message{Operation: "JOB_ASSIGN", Destination: "new"})
		if old[s2.span.(*leanSpan)] || old[p2.span.(*leanSpan)] {
			reused++
		}
		staleCalls(s, p)
		if s.Recording() {
			t.Fatal("an ended Send records")
		}
		if s.Creation() != cr || !p.SpanContext().Equal(psc) {
			t.Fatalf("round %d: stale handles lost their span contexts", i)
		}
		s2.Created(fmt.Sprint("H:", i))
		p2.Complete()
	}
	if reused == 0 {
		t.Fatal("no record was reused: the test proves nothing")
	}
	ended := rec.Ended()
	if len(ended) != 4*50 {
		t.Fatalf("%d spans exported, want %d", len(ended), 4*50)
	}
	for _, span := range ended {
		if hasStale(span) {
			t.Fatalf("span %q took a stale handle's call: %v %v", span.Name(), span.Attributes(), span.Events())
		}
		if len(span.Events()) != 0 {
			t.Fatalf("span %q has events %v", span.Name(), span.Events())
		}
	}
}

// TestLeanRecycleRace uses handles after their spans ended while other
// goroutines start and end spans that reuse the records; run with -race.
// Every exported span must carry exactly what its own handles set.
func TestLeanRecycleRace(t *testing.T) {
	tr, rec := recorded(t, Beanstalk, Config{})
	ctx := context.Background()
	type pair struct {
		s Send
		p Process
	}
	const workers, jobs = 4, 300
	stale := make(chan pair, 64)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := range jobs {
				dest := fmt.Sprintf("w%d-%d", w, j)
				s := tr.StartSendBare(ctx, time.Time{})
				s.Describe(Message{Operation: "put", Destination: dest})
				s.Created(dest)
				_, p := tr.StartProcess(ctx, s.Creation(), Message{Operation: "reserve", Destination: dest})
				p.Touch()
				p.Complete()
				select {
				case stale <- pair{s, p}:
				default:
				}
			}
		})
	}
	done := make(chan struct{})
	var staleWG sync.WaitGroup
	staleWG.Go(func() {
		for {
			select {
			case h := <-stale:
				staleCalls(h.s, h.p)
			case <-done:
				return
			}
		}
	})
	wg.Wait()
	close(done)
	staleWG.Wait()

	ended := rec.Ended()
	if len(ended) != 2*workers*jobs {
		t.Fatalf("%d spans exported, want %d", len(ended), 2*workers*jobs)
	}
	for _, span := range ended {
		if hasStale(span) {
			t.Fatalf("span %q took a stale handle's call", span.Name())
		}
		a := attrs(span.Attributes())
		dest, _ := a["messaging.destination.name"].(string)
		switch span.SpanKind() {
		case trace.SpanKindProducer:
			if span.Name() != "send "+dest || a["messaging.message.id"] != dest {
				t.Fatalf("send span %q: %v", span.Name(), a)
			}
		case trace.SpanKindConsumer:
			if span.Name() != "process "+dest || a[string(AttrOutcome)] != OutcomeCompleted || len(span.Events()) != 1 {
				t.Fatalf("process span %q: %v %v", span.Name(), a, span.Events())
			}
		default:
			t.Fatalf("unexpected span %q", span.Name())
		}
	}
}

// TestLeanPinnedSpanIsNotRecycled: a span handed out bare (Process.Span,
// the span in StartProcess's context) keeps its record, which a later
// span then never shares.
func TestLeanPinnedSpanIsNotRecycled(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	ctx := context.Background()
	pctx, p := tr.StartProcess(ctx, Creation{}, Message{Destination: "pinned"})
	bare := trace.SpanFromContext(pctx)
	if !bare.SpanContext().Equal(p.SpanContext()) || !bare.IsRecording() {
		t.Fatal("the context does not carry the open process span")
	}
	bare.SetAttributes(attribute.String("via", "context"))
	p.Complete()
	record := p.span.(*leanSpan)
	for range 20 {
		s := tr.StartSend(ctx, Message{Destination: "later"})
		if s.span.(*leanSpan) == record {
			t.Fatal("a pinned record was reused")
		}
		s.End()
	}
	if bare.IsRecording() || !bare.SpanContext().Equal(p.SpanContext()) {
		t.Fatal("the bare span changed after its end")
	}
	bare.SetAttributes(attribute.String("via", "late")) // after End: ignored
	got := rec.Ended()[0]
	if a := attrs(got.Attributes()); a["via"] != "context" || got.Name() != "process pinned" {
		t.Fatalf("exported %q %v", got.Name(), a)
	}

	// A context looked up only after its span was recycled gives a
	// non-recording span with the right context.
	pctx, p = tr.StartProcess(ctx, Creation{}, Message{Destination: "late"})
	p.Complete()
	for range 5 {
		tr.StartSend(ctx, Message{Destination: "later"}).End()
	}
	if late := trace.SpanFromContext(pctx); !late.SpanContext().Equal(p.SpanContext()) {
		t.Fatal("a recycled process span's context lost its span context")
	}
}

// TestLeanSetOperationNameKeepsRecord: naming a process span's operation
// after its start (the payload envelope's early spans) sets the attribute
// without pinning the record, which Span().SetAttributes would.
func TestLeanSetOperationNameKeepsRecord(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	p := tr.ProcessOnly(Creation{}, Message{Destination: "d"})
	p.SetOperationName("JOB_ASSIGN_UNIQ")
	record := p.span.(*leanSpan)
	record.mu.Lock()
	pinned := record.pinned
	record.mu.Unlock()
	if pinned {
		t.Fatal("SetOperationName pinned the record")
	}
	p.Complete()
	got := rec.Ended()
	if len(got) != 1 || attrs(got[0].Attributes())["messaging.operation.name"] != "JOB_ASSIGN_UNIQ" {
		t.Fatalf("exported %v", got)
	}
}

// TestLeanRecycledAtEnd: a span's record is encoded and recycled when the
// span ends, long before its batch is full or exported, so the next span
// can take it while it is still in the cache; the span still arrives
// whole when the batch goes.
func TestLeanRecycledAtEnd(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
	exp := &countExporter{}
	p, err := New(context.Background(), Config{Enabled: true}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	s := p.Tracer(Gearman).StartSend(context.Background(), Message{Operation: "SUBMIT_JOB", Destination: "f"})
	rec := s.span.(*leanSpan)
	s.Created("H:1")
	rec.mu.Lock()
	gen := rec.gen
	rec.mu.Unlock()
	if gen == s.gen {
		t.Fatal("the record of an ended span was not recycled before its batch was exported")
	}
	if n := exp.n.Load(); n != 0 {
		t.Fatalf("%d spans exported before the batch was full or flushed", n)
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := exp.n.Load(); n != 1 {
		t.Fatalf("%d spans exported by the flush, want 1", n)
	}
}
