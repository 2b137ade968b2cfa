package jobctx

import (
	"bytes"
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestExtract(t *testing.T) {
	payload := []byte("traceparent: " + tp + "\nhello\nworld")
	ctx, body := Extract(context.Background(), payload)
	if string(body) != "hello\nworld" {
		t.Fatalf("body %q", body)
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsRemote() || !sc.IsSampled() || sc.TraceID().String() != tp[3:35] || sc.SpanID().String() != tp[36:52] {
		t.Fatalf("span context %v", sc)
	}
	if len(payload)-len(body) != EnvelopeLen || EnvelopeLen != 69 {
		t.Fatalf("envelope is %d bytes, want 69", len(payload)-len(body))
	}
}

// TestNotAnEnvelope: anything short of an exact envelope is an ordinary
// body and comes back untouched.
func TestNotAnEnvelope(t *testing.T) {
	for _, p := range []string{
		"",
		"hello",
		"traceparent: " + tp,             // no newline
		"traceparent: " + tp + "x",       // not a newline at byte 68
		"traceparent:  " + tp[1:] + "\n", // spacing
		"Traceparent: " + tp + "\n",      // case
		"traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01\n",
		"traceparent: 00-00000000000000000000000000000000-00f067aa0ba902b7-01\n",
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01\n",
		"traceparent: 01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
		"traceparent: 00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
	} {
		payload := []byte(p)
		ctx, body := Extract(context.Background(), payload)
		if !bytes.Equal(body, payload) || trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("%q: treated as an envelope", p)
		}
	}
}

func TestInject(t *testing.T) {
	sc, ok := ParseTraceparent([]byte(tp))
	if !ok {
		t.Fatal("ParseTraceparent failed")
	}
	got := Inject([]byte("pre:"), sc, []byte("body"))
	if string(got) != "pre:traceparent: "+tp+"\nbody" {
		t.Fatalf("Inject = %q", got)
	}
	if got := Inject(nil, trace.SpanContext{}, []byte("body")); string(got) != "body" {
		t.Fatalf("Inject with no context = %q", got)
	}
	// Unsampled flags survive.
	sc = sc.WithTraceFlags(0)
	back, body, ok := Split(Inject(nil, sc, nil))
	if !ok || back.IsSampled() || len(body) != 0 {
		t.Fatalf("unsampled round trip: %v %q %v", back, body, ok)
	}
}

// FuzzSplit: Split never panics, never claims an envelope it could not have
// written, and re-injecting what it found gives the input back.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("traceparent: " + tp + "\nbody"))
	f.Add([]byte("traceparent: " + tp + "\n"))
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		sc, body, ok := Split(payload)
		if !ok {
			if !bytes.Equal(body, payload) || sc.IsValid() {
				t.Fatal("no envelope, but the payload changed")
			}
			return
		}
		if !sc.IsValid() || !bytes.Equal(Inject(nil, sc, body), payload) {
			t.Fatalf("%q: split does not round-trip", payload)
		}
	})
}
