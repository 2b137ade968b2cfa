package tracing

import (
	"bytes"
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/tracing/jobctx"
)

func TestWrapPayloadOffByDefault(t *testing.T) {
	tr, _ := recorded(t, Gearman, Config{})
	body := []byte(`{"id":1}`)
	got, ok := tr.WrapPayload(nil, testSpanContext(1), body)
	if ok || &got[0] != &body[0] {
		t.Fatal("switched off: WrapPayload must return the body itself")
	}
}

// TestPayloadEnvelope: with the switch on, the proxy wraps the body at
// delivery with the process span's context; a worker using jobctx gets the
// original body back and a context whose spans are children of the
// process span.
func TestPayloadEnvelope(t *testing.T) {
	tr, rec := recorded(t, Beanstalk, Config{PayloadTraceparent: true})
	ctx := context.Background()
	s := tr.StartSend(ctx, Message{Operation: "put", Destination: "t"})
	s.Created("1")
	_, p := tr.StartProcess(ctx, s.Creation(), Message{Operation: "reserve", Destination: "t"})

	body := []byte("resize 800x600")
	wire, ok := tr.WrapPayload(make([]byte, 0, 128), p.SpanContext(), body)
	if !ok || len(wire) != len(body)+EnvelopeLen {
		t.Fatalf("wrapped %q, %v", wire, ok)
	}
	want := "traceparent: " + string(jobctx.AppendTraceparent(nil, p.SpanContext())) + "\n" + string(body)
	if string(wire) != want {
		t.Fatalf("wire body %q, want %q", wire, want)
	}

	// The worker's side.
	wctx, got := jobctx.Extract(ctx, wire)
	if !bytes.Equal(got, body) {
		t.Fatalf("worker sees %q, want %q", got, body)
	}
	_, ws := tr.tracer.Start(wctx, "worker code")
	ws.End()
	p.Complete()
	spans := rec.Ended()
	if len(spans) != 3 || spans[1].Name() != "worker code" {
		t.Fatalf("spans: %d", len(spans))
	}
	if spans[1].Parent().SpanID() != p.SpanContext().SpanID() ||
		spans[1].SpanContext().TraceID() != s.Creation().SpanContext().TraceID() {
		t.Fatal("the worker's span should be a child of the process span, in the job's trace")
	}

	// The proxy's side of a submit from a client that wrapped its own body.
	c, rest, ok := UnwrapPayload(wire)
	if !ok || c != CreationOf(p.SpanContext()) || !bytes.Equal(rest, body) {
		t.Fatalf("UnwrapPayload = %v %q %v", c, rest, ok)
	}
	if c, rest, ok := UnwrapPayload(body); ok || c != (Creation{}) || &rest[0] != &body[0] {
		t.Fatal("UnwrapPayload of a plain body must return it unchanged")
	}
	// An invalid context adds no envelope even when switched on.
	if b, ok := tr.WrapPayload(nil, trace.SpanContext{}, body); ok || &b[0] != &body[0] {
		t.Fatal("WrapPayload with an invalid context must return the body")
	}
}
