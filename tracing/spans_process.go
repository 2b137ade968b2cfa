package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Process is an open CONSUMER span, from assignment to the job's outcome.
// The zero Process (tracing off, or no open span) is valid and does
// nothing. Process is a small value; copy it freely, but end it once.
type Process struct {
	span trace.Span
	// On the lean path: the record's generation, and the span's context,
	// which outlives the record (lean_recycle.go).
	gen uint32
	cr  Creation
	ts  *trace.TraceState
}

// IsOpen reports whether p holds a span, which says nothing about whether
// it has been ended.
func (p Process) IsOpen() bool { return p.span != nil }

// Span returns the underlying span, or a no-op span for the zero Process.
func (p Process) Span() trace.Span {
	if p.span == nil {
		return trace.SpanFromContext(context.Background())
	}
	if ls, ok := p.span.(*leanSpan); ok {
		return ls.pin(p.gen, p.cr.spanContext(p.ts))
	}
	if p.span == unsampled {
		return unsampledSpan{sc: p.cr.spanContext(p.ts)}
	}
	return p.span
}

// SpanContext returns the span's context, e.g. to inject into the payload
// delivered to the worker ([Tracer.WrapPayload]).
func (p Process) SpanContext() trace.SpanContext {
	if p.span == nil {
		return trace.SpanContext{}
	}
	if _, ok := p.span.(*leanSpan); ok || p.span == unsampled {
		return p.cr.spanContext(p.ts)
	}
	return p.span.SpanContext()
}

// SetOperationName sets messaging.operation.name, for a span started
// before its operation was known. Unlike Span().SetAttributes, it keeps
// a lean span's record recyclable.
func (p Process) SetOperationName(op string) {
	a := semconv.MessagingOperationName(op)
	if ls, ok := p.span.(*leanSpan); ok {
		ls.setAttrOf(p.gen, a)
		return
	}
	if p.span != nil && p.span != unsampled {
		p.span.SetAttributes(a)
	}
}

// event records an event with n (0 to 2) of a0 and a1 as attributes.
// Not variadic: on the lean path the attributes then stay on the stack.
func (p Process) event(name string, n int, a0, a1 attribute.KeyValue) {
	if ls, ok := p.span.(*leanSpan); ok {
		attrs := [2]attribute.KeyValue{a0, a1}
		ls.event(p.gen, name, leanTime(), attrs[:n]...)
		return
	}
	if p.span != nil && p.span != unsampled {
		sdkEvent(p.span, name, n, a0, a1)
	}
}

// sdkEvent is Process.event on the SDK path, apart so that its slice,
// which escapes there, is not allocated on the lean path.
func sdkEvent(span trace.Span, name string, n int, a0, a1 attribute.KeyValue) {
	attrs := []attribute.KeyValue{a0, a1}
	span.AddEvent(name, trace.WithAttributes(attrs[:n]...))
}

// Status records a WORK_STATUS event with its progress fraction.
func (p Process) Status(numerator, denominator string) {
	p.event(EventWorkStatus, 2, AttrNumerator.String(numerator), AttrDenominator.String(denominator))
}

// Data records a WORK_DATA event carrying size bytes.
func (p Process) Data(size int) {
	p.event(EventWorkData, 1, semconv.MessagingMessageBodySize(size), attribute.KeyValue{})
}

// Warning records a WORK_WARNING event carrying size bytes.
func (p Process) Warning(size int) {
	p.event(EventWorkWarning, 1, semconv.MessagingMessageBodySize(size), attribute.KeyValue{})
}

// Touch records a touch event: the worker asked for more time.
func (p Process) Touch() { p.event(EventTouch, 0, attribute.KeyValue{}, attribute.KeyValue{}) }

// Complete ends the span as successful (WORK_COMPLETE, delete).
func (p Process) Complete() {
	p.end(AttrOutcome.String(OutcomeCompleted), false, "")
}

// Fail ends the span as failed with error.type errType: "WORK_FAIL",
// "WORK_EXCEPTION", [ErrorWorkerLost], or another short, low-cardinality
// reason.
func (p Process) Fail(errType string) {
	p.end(AttrOutcome.String(OutcomeFailed), true, errType)
}

// Release records a release event and ends the span: the worker put the job
// back to be retried after delay. Not an error; the retry is the next
// receive and process pair in the same trace.
func (p Process) Release(priority uint32, delay time.Duration) {
	if p.span == nil {
		return
	}
	p.event(EventRelease, 2, AttrPriority.Int64(int64(priority)), AttrDelay.Int64(delay.Milliseconds()))
	p.end(AttrOutcome.String(OutcomeReleased), false, "")
}

// Bury records a bury event and ends the span as failed (error.type
// "bury"): the worker gave up on the job.
func (p Process) Bury(priority uint32) {
	if p.span == nil {
		return
	}
	p.event(EventBury, 1, AttrPriority.Int64(int64(priority)), attribute.KeyValue{})
	p.end(AttrOutcome.String(OutcomeBuried), true, EventBury)
}

// TTRExpired records a ttr_expired event and ends the span as failed
// (error.type "ttr_expired"): the server took the job back from a worker
// that did not finish in time.
func (p Process) TTRExpired() {
	if p.span == nil {
		return
	}
	p.event(EventTTRExpired, 0, attribute.KeyValue{}, attribute.KeyValue{})
	p.end(AttrOutcome.String(OutcomeTTRExpired), true, OutcomeTTRExpired)
}

// evict ends a span whose Table entry was evicted, so it is exported
// instead of silently lost.
func (p Process) evict() {
	p.end(AttrOutcome.String(OutcomeEvicted), true, OutcomeEvicted)
}

// end sets outcome, fails the span with errType when fail, and ends it.
func (p Process) end(outcome attribute.KeyValue, fail bool, errType string) {
	if ls, ok := p.span.(*leanSpan); ok {
		ls.endWith(p.gen, outcome, fail, errType)
		return
	}
	if p.span == nil || p.span == unsampled {
		return
	}
	setAttr(p.span, outcome)
	if fail {
		failEnd(p.span, errType)
		return
	}
	p.span.End()
}

// failEnd sets error.type and an error status, then ends span. The status
// description repeats errType because Jaeger shows the status, not
// error.type, in its span list.
func failEnd(span trace.Span, errType string) {
	if span == nil {
		return
	}
	if errType == "" {
		errType = semconv.ErrorTypeOther.Value.AsString()
	}
	setAttr(span, semconv.ErrorTypeKey.String(errType))
	span.SetStatus(codes.Error, errType)
	span.End()
}
