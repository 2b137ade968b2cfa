package tracing

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/tracing/jobctx"
)

// CreationLen is the size of a [Creation] in bytes.
const CreationLen = 26

// creationVersion is the first byte of a Creation. It is the W3C traceparent
// version the fields follow, so a future layout can be told apart.
const creationVersion = 0x00

// Creation is a job's creation context: the span context of its PRODUCER
// `send` span in 26 bytes, small enough for an engine to keep with every job
// and write to its journal. The layout is fixed:
//
//	[0]      version, 0x00 (the W3C traceparent version)
//	[1:17]   trace id
//	[17:25]  span id
//	[25]     trace flags (0x01 = sampled)
//
// The zero Creation means "not traced" (tracing off, or a job from before
// tracing was on); every helper accepts it and then starts spans with no
// parent. Creation is a value type: copy it freely, compare it with ==.
type Creation [CreationLen]byte

// ErrCreation is returned, wrapped, for bytes that are not a Creation.
var ErrCreation = errors.New("tracing: invalid creation context")

// CreationOf packs a span context. An invalid span context gives the zero
// Creation.
func CreationOf(sc trace.SpanContext) Creation {
	var c Creation
	if !sc.IsValid() {
		return c
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	c[0] = creationVersion
	copy(c[1:17], tid[:])
	copy(c[17:25], sid[:])
	c[25] = byte(sc.TraceFlags())
	return c
}

// ParseCreation decodes the 26 bytes written by [Creation.AppendBinary]. All
// zero bytes decode to the zero Creation; other bytes must carry version 0
// and valid ids.
func ParseCreation(b []byte) (Creation, error) {
	var c Creation
	if len(b) != CreationLen {
		return c, fmt.Errorf("%w: %d bytes, want %d", ErrCreation, len(b), CreationLen)
	}
	copy(c[:], b)
	if c == (Creation{}) {
		return c, nil
	}
	if c[0] != creationVersion {
		return Creation{}, fmt.Errorf("%w: version %#x", ErrCreation, c[0])
	}
	if !c.IsValid() {
		return Creation{}, fmt.Errorf("%w: zero trace or span id", ErrCreation)
	}
	return c, nil
}

// ParseTraceparent decodes a W3C traceparent value
// ("00-<trace id>-<span id>-<flags>") into a Creation.
func ParseTraceparent(s string) (Creation, error) {
	sc, ok := jobctx.ParseTraceparent([]byte(s))
	if !ok {
		return Creation{}, fmt.Errorf("%w: traceparent %q", ErrCreation, s)
	}
	return CreationOf(sc), nil
}

// SpanContext unpacks c. The span context is marked remote because the span
// it names was started elsewhere: on another connection, by another process,
// or before a restart.
func (c Creation) SpanContext() trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], c[1:17])
	copy(sid[:], c[17:25])
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    tid,
		SpanID:     sid,
		TraceFlags: trace.TraceFlags(c[25]),
		Remote:     true,
	})
}

// ContextWithCreation returns ctx with c as its remote parent span
// context, so the next span started from it joins c's trace. With a zero c
// it returns ctx unchanged.
func ContextWithCreation(ctx context.Context, c Creation) context.Context {
	if !c.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, c.SpanContext())
}

// IsValid reports whether c names a span (non-zero trace and span ids).
// It reads the bytes: building the span context to ask it was a visible
// part of every traced delivery.
func (c Creation) IsValid() bool {
	return [16]byte(c[1:17]) != [16]byte{} && [8]byte(c[17:25]) != [8]byte{}
}

// IsSampled reports whether the job's trace is being recorded.
func (c Creation) IsSampled() bool { return c[25]&byte(trace.FlagsSampled) != 0 }

// AppendBinary appends the 26-byte form of c to b. It never fails; the error
// is there to satisfy encoding.BinaryAppender.
func (c Creation) AppendBinary(b []byte) ([]byte, error) { return append(b, c[:]...), nil }

// MarshalBinary returns the 26-byte form of c.
func (c Creation) MarshalBinary() ([]byte, error) { return c.AppendBinary(nil) }

// UnmarshalBinary sets c from its 26-byte form; see [ParseCreation].
func (c *Creation) UnmarshalBinary(b []byte) error {
	v, err := ParseCreation(b)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Traceparent returns c as a W3C traceparent value, or "" for an invalid c.
func (c Creation) Traceparent() string {
	if !c.IsValid() {
		return ""
	}
	return string(jobctx.AppendTraceparent(make([]byte, 0, jobctx.TraceparentLen), c.SpanContext()))
}

// String returns the traceparent form, for logs.
func (c Creation) String() string { return c.Traceparent() }

// MarshalText returns the traceparent form (empty for an invalid c), for
// JSON, YAML and admin output.
func (c Creation) MarshalText() ([]byte, error) { return []byte(c.Traceparent()), nil }

// UnmarshalText sets c from a traceparent value; empty text gives the zero
// Creation.
func (c *Creation) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*c = Creation{}
		return nil
	}
	v, err := ParseTraceparent(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}
