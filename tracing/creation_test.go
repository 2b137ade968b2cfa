package tracing

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var (
	_ encoding.BinaryAppender    = Creation{}
	_ encoding.BinaryMarshaler   = Creation{}
	_ encoding.BinaryUnmarshaler = (*Creation)(nil)
	_ encoding.TextMarshaler     = Creation{}
	_ encoding.TextUnmarshaler   = (*Creation)(nil)
)

func testSpanContext(flags trace.TraceFlags) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: flags,
	})
}

// TestCreationLayout pins the byte layout engines journal: changing it
// would strand every traced job in every journal.
func TestCreationLayout(t *testing.T) {
	c := CreationOf(testSpanContext(trace.FlagsSampled))
	want := []byte{
		0x00,
		0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
		0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7,
		0x01,
	}
	b, err := c.AppendBinary([]byte("job:"))
	if err != nil || !bytes.Equal(b, append([]byte("job:"), want...)) {
		t.Fatalf("AppendBinary = %x, %v; want job: then %x", b, err, want)
	}
	if got := c.Traceparent(); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("Traceparent = %q", got)
	}
}

func TestCreationRoundTrip(t *testing.T) {
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		sc := testSpanContext(flags)
		c := CreationOf(sc)

		b, _ := c.MarshalBinary()
		var back Creation
		if err := back.UnmarshalBinary(b); err != nil || back != c {
			t.Fatalf("binary: %v, %v", back, err)
		}
		got := back.SpanContext()
		if !got.IsRemote() || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || got.TraceFlags() != flags {
			t.Fatalf("SpanContext = %v, want %v remote", got, sc)
		}
		if back.IsSampled() != flags.IsSampled() {
			t.Fatalf("IsSampled = %v", back.IsSampled())
		}

		p, err := ParseTraceparent(c.Traceparent())
		if err != nil || p != c {
			t.Fatalf("traceparent: %v, %v", p, err)
		}
		j, _ := json.Marshal(struct{ C Creation }{c})
		var v struct{ C Creation }
		if err := json.Unmarshal(j, &v); err != nil || v.C != c {
			t.Fatalf("json %s: %v, %v", j, v.C, err)
		}
	}

	// The zero Creation is "not traced" in every form.
	var zero Creation
	if zero.IsValid() || zero.Traceparent() != "" || zero.String() != "" {
		t.Fatal("zero Creation should be invalid and render empty")
	}
	if c := CreationOf(trace.SpanContext{}); c != zero {
		t.Fatal("CreationOf(invalid) should be zero")
	}
	if c, err := ParseCreation(make([]byte, CreationLen)); err != nil || c != zero {
		t.Fatalf("ParseCreation(zeros) = %v, %v", c, err)
	}
	ctx := context.Background()
	if ContextWithCreation(ctx, zero) != ctx {
		t.Fatal("ContextWithCreation(zero) should not change ctx")
	}
	c := CreationOf(testSpanContext(1))
	if got := trace.SpanContextFromContext(ContextWithCreation(ctx, c)); !got.Equal(c.SpanContext()) {
		t.Fatalf("ContextWithCreation carries %v", got)
	}
	var z Creation
	if err := z.UnmarshalText(nil); err != nil || z != zero {
		t.Fatal("UnmarshalText(empty) should give zero")
	}
}

func TestCreationInvalid(t *testing.T) {
	good, _ := CreationOf(testSpanContext(1)).MarshalBinary()
	version := bytes.Clone(good)
	version[0] = 0x01
	noSpan := bytes.Clone(good)
	clear(noSpan[17:25])
	for name, b := range map[string][]byte{
		"short":   good[:25],
		"long":    append(bytes.Clone(good), 0),
		"version": version,
		"no span": noSpan,
	} {
		if _, err := ParseCreation(b); !errors.Is(err, ErrCreation) {
			t.Errorf("%s: err %v, want ErrCreation", name, err)
		}
	}
	for _, s := range []string{
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",    // no flags
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
	} {
		if _, err := ParseTraceparent(s); !errors.Is(err, ErrCreation) {
			t.Errorf("ParseTraceparent(%q): err %v, want ErrCreation", s, err)
		}
	}
}

// TestCreationAfterRestart: the engine journals a job's creation context;
// after a restart, with a brand-new provider, the job's process span still
// joins the trace its submit started.
func TestCreationAfterRestart(t *testing.T) {
	ctx := context.Background()
	before := tracetest.NewSpanRecorder()
	tp1 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(before))
	s := NewTracer(tp1, Beanstalk, Config{}).StartSend(ctx, Message{Operation: "put", Destination: "t"})
	s.Created("9")
	journal, _ := s.Creation().AppendBinary(nil)
	if err := tp1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	var c Creation
	if err := c.UnmarshalBinary(journal); err != nil {
		t.Fatal(err)
	}
	after := tracetest.NewSpanRecorder()
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(after))
	defer tp2.Shutdown(ctx)
	tr := NewTracer(tp2, Beanstalk, Config{})
	m := Message{Operation: "reserve", Destination: "t", ID: "9"}
	tr.Receive(ctx, c, m)
	_, p := tr.StartProcess(ctx, c, m)
	p.Complete()

	send := before.Ended()[0].SpanContext()
	got := after.Ended()
	if len(got) != 2 {
		t.Fatalf("%d spans after restart, want 2", len(got))
	}
	for _, sp := range got {
		if sp.SpanContext().TraceID() != send.TraceID() {
			t.Errorf("%s: trace %s, want %s", sp.Name(), sp.SpanContext().TraceID(), send.TraceID())
		}
		if sp.Parent().SpanID() != send.SpanID() || !sp.Parent().IsRemote() {
			t.Errorf("%s: parent %v, want the journaled send span %s (remote)", sp.Name(), sp.Parent(), send.SpanID())
		}
	}
	if l := got[0].Links(); len(l) != 1 || l[0].SpanContext.SpanID() != send.SpanID() {
		t.Errorf("receive links %v, want the send span", l)
	}
}

// TestCreationIsValid: IsValid, which reads the bytes, agrees with the
// span context's IsValid for every combination of zero and non-zero ids
// and flags.
func TestCreationIsValid(t *testing.T) {
	for mask := 0; mask < 16; mask++ {
		var c Creation
		if mask&1 != 0 {
			c[1] = 1
		}
		if mask&2 != 0 {
			c[16] = 2
		}
		if mask&4 != 0 {
			c[24] = 3
		}
		if mask&8 != 0 {
			c[25] = 1
		}
		if got, want := c.IsValid(), c.SpanContext().IsValid(); got != want {
			t.Errorf("%x: IsValid %v, span context's %v", c, got, want)
		}
	}
}
