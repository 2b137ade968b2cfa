package tracing

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// TestUnsampledJobAllocatesNothing: at always_off, the calls the proxy
// makes for each job (the send span started bare, then created or failed;
// the receive and process spans of an assignment, with events and an end)
// allocate nothing. Each unsampled span boxed an unsampledSpan in its
// handle: 80 bytes, once per span. The handles still carry the spans'
// contexts, so the job's later spans share the decision.
func TestUnsampledJobAllocatesNothing(t *testing.T) {
	clearEnv(t)
	p, err := New(context.Background(), Config{Enabled: true, Sampler: SamplerAlwaysOff, ServiceName: "t",
		Endpoint: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	tr := p.Tracer(Gearman)
	m := Message{Operation: "JOB_ASSIGN", Destination: "f", IDPrefix: "H:t:", IDNum: 7, Attempt: 1}
	job := func() {
		s := tr.StartSendBare(context.Background(), tr.Now())
		if s.Recording() {
			t.Fatal("always_off recorded a send span")
		}
		s.Describe(m)
		s.CreatedNum("H:t:", 7)
		cr := s.Creation()
		d := tr.Deliver(cr, m)
		d.Status("1", "2")
		d.Data(3)
		d.Complete()
		o := tr.ProcessOnly(cr, m)
		o.Warning(1)
		o.Fail("WORK_FAIL")
		f := tr.StartSendBare(context.Background(), time.Time{})
		f.Fail("ERROR")
		e := tr.StartSendBare(context.Background(), time.Time{})
		e.End()
		e.Created("H:t:8")
	}
	if a := testing.AllocsPerRun(1000, job); a != 0 {
		t.Errorf("an unsampled job allocates %v times, want 0", a)
	}

	// The contexts are kept: the process span is in the send's trace,
	// unsampled, and its Span and SpanContext agree.
	s := tr.StartSendBare(context.Background(), time.Time{})
	cr := s.Creation()
	send := s.Span().SpanContext()
	if !cr.IsValid() || cr.IsSampled() || cr != CreationOf(send) || send.IsSampled() {
		t.Fatalf("send: creation %v, span context %v", cr, send)
	}
	d := tr.Deliver(cr, m)
	sc := d.SpanContext()
	if !d.IsOpen() || sc.TraceID() != send.TraceID() || !sc.IsValid() || sc.IsSampled() || sc.SpanID() == send.SpanID() {
		t.Fatalf("process span context %v, send %v", sc, send)
	}
	if got := d.Span().SpanContext(); !got.Equal(sc) || d.Span().IsRecording() {
		t.Fatalf("Span() context %v, want %v", got, sc)
	}
	ctx, sp := tr.StartProcess(context.Background(), cr, m)
	if got := trace.SpanContextFromContext(ctx); !got.Equal(sp.SpanContext()) || got.TraceID() != send.TraceID() {
		t.Fatalf("StartProcess context %v, handle %v", got, sp.SpanContext())
	}
}
