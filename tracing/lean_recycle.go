package tracing

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Recycling lean span records. Three records per job were most of the
// lean path's garbage, so each record goes back to a pool as soon as its
// span has ended and been encoded into its batch (leanPipe.enqueue), and
// startSpan takes records from there.
//
// The hazard is a handle used after its span ended: a Send or Process kept
// by the proxy could otherwise write into a record that now belongs to
// another job's span. Every handle therefore carries the record's
// generation, which recycling bumps under the record's lock, and each
// handle method checks it under that lock: a stale handle does nothing.
// The handles keep their own copy of the span's ids, so Creation and
// SpanContext stay right after the record is gone. A record handed out as
// a bare trace.Span (Send.Span, Process.Span, the span in StartProcess's
// context) carries no generation; it is pinned and never recycled.

var leanSpanPool = sync.Pool{New: func() any { return new(leanSpan) }}

// newLeanSpan returns a record in its zero state, except for its
// generation.
func newLeanSpan() *leanSpan { return leanSpanPool.Get().(*leanSpan) }

// recycle returns an ended, exported (or dropped) record to the pool,
// unless it is pinned. Nothing reads it any more but stale handles, which
// see the new generation.
func (s *leanSpan) recycle() {
	s.mu.Lock()
	if s.pinned || !s.ended {
		s.mu.Unlock()
		return
	}
	s.gen++
	events, extra := s.events, s.extra
	clear(events)
	clear(extra)
	s.lt, s.ended, s.linkParent, s.has, s.status = nil, false, false, 0, codes.Unset
	s.sc, s.parent, s.link, s.kind = trace.SpanContext{}, trace.SpanContext{}, nil, 0
	s.name, s.nameDest, s.start, s.end = "", "", 0, 0
	s.system, s.opType, s.opName, s.dest, s.msgID, s.convID, s.serverAddr = "", "", "", "", "", "", ""
	s.msgIDPrefix, s.msgIDNum = "", 0
	s.bodySize, s.serverPort, s.attempt, s.queueWait = 0, 0, 0, 0
	s.outcome, s.errType, s.statusDesc = "", "", ""
	// The slices keep their arrays: the next process span's event is then
	// free. Oversized ones go, so one odd span does not hold memory.
	s.events, s.extra = nil, nil
	if cap(events) <= 4 {
		s.events = events[:0]
	}
	if cap(extra) <= 4 {
		s.extra = extra[:0]
	}
	s.mu.Unlock()
	leanSpanPool.Put(s)
}

// lockGen locks s and reports whether it is still the open span of
// generation gen. The caller unlocks s either way.
func (s *leanSpan) lockGen(gen uint32) bool {
	s.mu.Lock()
	return s.gen == gen && !s.ended
}

// recording reports whether the span of generation gen is open.
func (s *leanSpan) recording(gen uint32) bool {
	ok := s.lockGen(gen)
	s.mu.Unlock()
	return ok
}

// describe is Send.Describe for generation gen.
func (s *leanSpan) describe(gen uint32, m *Message) {
	if !s.lockGen(gen) {
		s.mu.Unlock()
		return
	}
	s.name, s.nameDest = "send", m.Destination
	s.setMessageLocked(semconv.MessagingOperationTypeSend.Value.AsString(), m, true)
	s.mu.Unlock()
}

// setAttrOf sets a on the span of generation gen.
func (s *leanSpan) setAttrOf(gen uint32, a attribute.KeyValue) {
	if s.lockGen(gen) {
		s.setAttr(a)
	}
	s.mu.Unlock()
}

// event adds an event to the span of generation gen.
func (s *leanSpan) event(gen uint32, name string, at time.Time, attrs ...attribute.KeyValue) {
	if !s.lockGen(gen) {
		s.mu.Unlock()
		return
	}
	s.addEventLocked(name, at, attrs)
	s.mu.Unlock()
}

// endWith sets a (when valid), and with fail error.type errType and an
// error status, then ends the span of generation gen: the ending methods
// of Send and Process in one locked step.
func (s *leanSpan) endWith(gen uint32, a attribute.KeyValue, fail bool, errType string) {
	end := leanNow()
	if !s.lockGen(gen) {
		s.mu.Unlock()
		return
	}
	if a.Valid() {
		s.setAttr(a)
	}
	if fail {
		if errType == "" {
			errType = semconv.ErrorTypeOther.Value.AsString()
		}
		s.setAttr(semconv.ErrorTypeKey.String(errType))
		if s.status != codes.Ok {
			s.status, s.statusDesc = codes.Error, errType
		}
	}
	s.ended = true
	s.end = end
	s.mu.Unlock()
	s.lt.pipe.enqueue(s)
}

// endWithNum is endWith for Send.CreatedNum: it records the id as a
// prefix and a number, for the encoder to format.
func (s *leanSpan) endWithNum(gen uint32, prefix string, n uint64) {
	end := leanNow()
	if !s.lockGen(gen) {
		s.mu.Unlock()
		return
	}
	if n != 0 {
		s.dropExtra(msgIDKey)
		s.msgID, s.msgIDPrefix, s.msgIDNum = "", prefix, n
	}
	s.ended = true
	s.end = end
	s.mu.Unlock()
	s.lt.pipe.enqueue(s)
}

// pin hands out the record of generation gen as a bare trace.Span, which
// then is never recycled. A stale generation gets a non-recording span
// with the context sc the handle kept.
func (s *leanSpan) pin(gen uint32, sc trace.SpanContext) trace.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return unsampledSpan{sc: sc}
	}
	s.pinned = true
	return s
}

// leanCtx is the context StartProcess returns for a lean span: it carries
// the span as trace.ContextWithSpan would, but only pins the record when
// someone looks the span up. The proxy discards this context, so its
// process records stay recyclable.
type leanCtx struct {
	context.Context
	s   *leanSpan
	gen uint32
	cr  Creation
	ts  *trace.TraceState
}

// Value returns the span for the OpenTelemetry span key, pinning it.
func (c *leanCtx) Value(key any) any {
	if key == spanCtxKey {
		return c.s.pin(c.gen, c.cr.spanContext(c.ts))
	}
	return c.Context.Value(key)
}

// spanCtxKey is the key under which the trace API keeps the current span.
// It is unexported there, so a probe context learns it from the one lookup
// trace.SpanFromContext makes.
var spanCtxKey = func() any {
	p := &keyProbe{Context: context.Background()}
	trace.SpanFromContext(p)
	return p.key
}()

type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

// spanContext rebuilds the local span context c was made from, with ts
// (nil: none) as its trace state.
func (c Creation) spanContext(ts *trace.TraceState) trace.SpanContext {
	if c == (Creation{}) {
		return trace.SpanContext{}
	}
	cfg := trace.SpanContextConfig{TraceFlags: trace.TraceFlags(c[25])}
	copy(cfg.TraceID[:], c[1:17])
	copy(cfg.SpanID[:], c[17:25])
	if ts != nil {
		cfg.TraceState = *ts
	}
	return trace.NewSpanContext(cfg)
}

// traceStateOf returns a pointer to sc's trace state, or nil when it is
// empty (the common case, which then costs nothing).
func traceStateOf(sc trace.SpanContext) *trace.TraceState {
	if sc.TraceState().Len() == 0 {
		return nil
	}
	ts := sc.TraceState()
	return &ts
}
