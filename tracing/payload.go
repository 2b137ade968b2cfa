package tracing

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/tracing/jobctx"
)

// The payload envelope
//
// Gearman and Beanstalk carry no headers, so the only way to hand a worker
// the trace context is inside the job body. With the PayloadTraceparent
// switch on, jobgate prefixes the body with one text line (see package
// jobctx for the worker side):
//
//	traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n
//
// Why this shape: it is text, so it survives any body a worker treats as text
// and reads plainly in beanstalk peek or a log; it has a fixed length
// (EnvelopeLen = 69), so stripping it is a prefix compare and a slice in any
// language, with no scanning of the body; and it is specific enough (a
// literal prefix, exact hex layout, newline at byte 68) that an ordinary body
// is never mistaken for one.
//
// The trade-off, and why it is off by default: a worker that does not strip
// it gets a different body (69 bytes longer, not valid JSON, a different
// checksum). Turn it on only for functions and tubes whose workers all use
// jobctx.Extract or strip the line themselves.
//
// Where to inject: at delivery (JOB_ASSIGN*, RESERVED), with the process
// span's context, is the better place. The stored job is untouched, so the
// server's size limit, beanstalk peek, the journal and Gearman coalescing of
// unique "-" (which keys on the body) all see the body the client sent, and
// the worker's spans nest under the process span. Injecting at submit, with
// [Send.Creation], is the fallback for workers that take jobs from the real
// server directly, bypassing jobgate; then the proxy must skip jobs whose body
// plus EnvelopeLen exceeds the server's job size limit, and Gearman jobs with
// unique "-".

// EnvelopeLen is how many bytes [Tracer.WrapPayload] adds to a body.
const EnvelopeLen = jobctx.EnvelopeLen

// PayloadTraceparent reports whether the payload envelope switch is on.
func (t *Tracer) PayloadTraceparent() bool { return t != nil && t.payload }

// WrapPayload prefixes body with a traceparent envelope for sc when the
// PayloadTraceparent switch is on and sc is valid: it appends envelope and
// body to dst and returns the result and true. Otherwise it returns body
// itself and false, without copying, so the proxy can pass the result on
// either way. Pass the process span's context at delivery
// ([Process.SpanContext]) or the creation context at submit
// ([Creation.SpanContext]).
func (t *Tracer) WrapPayload(dst []byte, sc trace.SpanContext, body []byte) ([]byte, bool) {
	if !t.PayloadTraceparent() || !sc.IsValid() {
		return body, false
	}
	return jobctx.Inject(dst, sc, body), true
}

// UnwrapPayload strips a traceparent envelope from payload: it returns the
// context the envelope carried, the body after it (aliasing payload) and
// true, or the zero Creation, payload and false when there is none. The
// proxy can use it on a submit to parent the send span to a client that
// wrapped its own payload ([ContextWithCreation]), and tests use it to
// check what a worker would see.
func UnwrapPayload(payload []byte) (Creation, []byte, bool) {
	sc, body, ok := jobctx.Split(payload)
	if !ok {
		return Creation{}, payload, false
	}
	return CreationOf(sc), body, true
}
