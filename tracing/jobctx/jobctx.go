// Package jobctx lets a Gearman or Beanstalk worker continue, in its own code,
// the trace that jobgate started for a job.
//
// When jobgate's payload-traceparent switch is on, a job body reaches the
// worker wrapped in a one-line envelope:
//
//	traceparent: 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>\n<original body>
//
// The envelope is exactly [EnvelopeLen] (69) bytes, so a worker in any
// language strips it with a prefix check and a fixed-length slice; no parsing
// or scanning of the body is needed. A Go worker calls [Extract]:
//
//	ctx, body := jobctx.Extract(ctx, job.Body)
//	ctx, span := tracer.Start(ctx, "resize image") // a child of jobgate's span
//
// A payload without a well-formed envelope is returned unchanged, so Extract
// is safe to call whether or not jobgate wrapped the job. The package depends
// only on go.opentelemetry.io/otel/trace and the standard library.
package jobctx

import (
	"bytes"
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"
)

// Prefix starts every envelope. It is text so that a human reading a job body
// (beanstalk peek, gearman logs) sees what it is, and long and specific enough
// that an ordinary payload does not begin with it by accident.
const Prefix = "traceparent: "

// TraceparentLen is the length of a version-00 W3C traceparent header value.
const TraceparentLen = 55

// EnvelopeLen is the number of bytes an envelope adds in front of a body:
// the prefix, a version-00 traceparent and a newline.
const EnvelopeLen = len(Prefix) + TraceparentLen + 1

// Split reports whether payload starts with an envelope carrying a valid span
// context. If it does, Split returns that span context (marked remote) and the
// body after the envelope, which aliases payload; otherwise it returns an
// invalid span context, payload itself and false.
func Split(payload []byte) (trace.SpanContext, []byte, bool) {
	if len(payload) < EnvelopeLen || !bytes.HasPrefix(payload, []byte(Prefix)) ||
		payload[EnvelopeLen-1] != '\n' {
		return trace.SpanContext{}, payload, false
	}
	sc, ok := ParseTraceparent(payload[len(Prefix) : EnvelopeLen-1])
	if !ok {
		return trace.SpanContext{}, payload, false
	}
	return sc, payload[EnvelopeLen:], true
}

// Extract strips an envelope from payload and returns ctx carrying its span
// context as the remote parent, so spans the worker starts from the returned
// context join the job's trace. Without an envelope it returns ctx and
// payload unchanged. The returned body aliases payload.
func Extract(ctx context.Context, payload []byte) (context.Context, []byte) {
	sc, body, ok := Split(payload)
	if !ok {
		return ctx, payload
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc), body
}

// Inject appends an envelope for sc followed by body to dst and returns the
// extended slice. An invalid sc appends body alone, so the caller need not
// check whether the job is traced.
func Inject(dst []byte, sc trace.SpanContext, body []byte) []byte {
	if !sc.IsValid() {
		return append(dst, body...)
	}
	dst = append(dst, Prefix...)
	dst = AppendTraceparent(dst, sc)
	dst = append(dst, '\n')
	return append(dst, body...)
}

// AppendTraceparent appends the W3C traceparent value of sc (version 00,
// 55 bytes, lower-case hex) to dst.
func AppendTraceparent(dst []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	dst = append(dst, "00-"...)
	dst = hex.AppendEncode(dst, tid[:])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, sid[:])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, []byte{byte(sc.TraceFlags())})
}

// ParseTraceparent parses a version-00 W3C traceparent value. It accepts only
// lower-case hex, as the W3C recommendation requires, and rejects all-zero
// trace or span ids. The span context it returns is marked remote.
func ParseTraceparent(b []byte) (trace.SpanContext, bool) {
	if len(b) != TraceparentLen || b[0] != '0' || b[1] != '0' ||
		b[2] != '-' || b[35] != '-' || b[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !decodeLowerHex(tid[:], b[3:35]) || !decodeLowerHex(sid[:], b[36:52]) ||
		!decodeLowerHex(flags[:], b[53:55]) {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    tid,
		SpanID:     sid,
		TraceFlags: trace.TraceFlags(flags[0]),
		Remote:     true,
	})
	return sc, sc.IsValid()
}

// decodeLowerHex decodes src into dst, refusing upper-case digits, which
// encoding/hex would accept but W3C trace context forbids.
func decodeLowerHex(dst, src []byte) bool {
	for _, c := range src {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, src)
	return err == nil
}
