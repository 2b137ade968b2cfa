package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// The lean path. A Provider's Tracers record jobgate's own job spans (send,
// receive, process) without the SDK: each span is one fixed-layout record
// whose messaging attributes are typed fields, so starting, describing and
// ending it boxes no attribute. An ended record is encoded as OTLP
// protobuf directly (lean_encode.go) into a batch of a bounded queue
// (lean_export.go) and recycled (lean_recycle.go), so it allocates
// nothing either. The SDK still serves everything else: command
// spans, and any library given Provider.TracerProvider. Sampling, ids and
// span contents are the SDK's, rule for rule; the tests check both agree.

// leanTracer is the lean path of one Tracer: its messaging system, the
// sampler and the export queue.
type leanTracer struct {
	system  string
	sampler leanSampler
	pipe    *leanPipe
}

// Bits of leanSpan.has: which optional numeric attributes are set (zero
// is a real value for them, unlike for the strings).
const (
	hasBodySize = 1 << iota
	hasServerPort
	hasAttempt
	hasQueueWait
)

// leanSpan is a recording job span on the lean path. It implements
// trace.Span so that Send, Process and the contexts they return work as
// with an SDK span; the methods jobgate calls on the data path read and
// write its typed fields directly.
type leanSpan struct {
	embedded.Span

	lt *leanTracer

	mu  sync.Mutex
	gen uint32 // bumped when recycled; handles carry it (lean_recycle.go)
	// ended: no more changes; pinned: handed out as a bare trace.Span,
	// so never recycled.
	ended  bool
	pinned bool
	// Small fields together, so the record packs into fewer words.
	linkParent bool
	has        uint8 // which optional numeric attributes are set
	status     codes.Code

	sc     trace.SpanContext
	parent trace.SpanContext
	// linkParent (above) links the span to its parent (receive spans);
	// link holds a link added through the API instead. Kept this way, with the
	// times as Unix nanoseconds, the record fits a smaller size class.
	link *trace.SpanContext
	kind trace.SpanKind
	// The name is name, or name + " " + nameDest when nameDest is set:
	// the encoder joins them, so naming a span allocates nothing.
	name     string
	nameDest string
	start    int64
	end      int64

	// Attributes, in the order they are encoded.
	system     string
	opType     string
	opName     string
	dest       string
	msgID      string
	convID     string
	serverAddr string
	bodySize   int64
	serverPort int64
	attempt    int64
	queueWait  int64
	outcome    string
	errType    string
	extra      []attribute.KeyValue // any other attribute set through the API

	statusDesc string
	events     []leanEvent

	// msgIDNum, when not 0 (and msgID empty), is the message id's number,
	// after msgIDPrefix: the encoder formats it (Message.IDNum), so the
	// data path builds no string.
	msgIDPrefix string
	msgIDNum    uint64
}

// leanEvent is a span event; jobgate's own have at most two attributes,
// which fit inline.
type leanEvent struct {
	name  string
	time  time.Time
	n     int
	attrs [2]attribute.KeyValue
	more  []attribute.KeyValue
}

func (e *leanEvent) attributes(f func(attribute.KeyValue)) {
	for _, kv := range e.attrs[:e.n] {
		f(kv)
	}
	for _, kv := range e.more {
		f(kv)
	}
}

var _ trace.Span = (*leanSpan)(nil)

// newTraceID and newSpanID draw random non-zero ids, as the SDK's default
// generator does; math/rand/v2's global source is per-thread and needs no
// lock.
func newTraceID() trace.TraceID {
	var t trace.TraceID
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t
}

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// startSpan starts a span under parent (invalid: a new trace) with the
// SDK's id, sampling and trace flag rules, and returns its record and its
// context. An unsampled span, or any span once the Provider is shut down,
// has no record (nil) but still its context, like the SDK's non-recording
// span: the handles keep that context themselves (unsampled), so an
// unsampled job allocates nothing.
func (lt *leanTracer) startSpan(parent trace.SpanContext, name, nameDest string, kind trace.SpanKind, start time.Time) (*leanSpan, trace.SpanContext) {
	if lt.pipe.closed.Load() {
		return nil, trace.SpanContext{}
	}
	tid := parent.TraceID()
	if !parent.IsValid() {
		tid = newTraceID()
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceState: parent.TraceState()}
	if lt.sampler.sample(parent, tid) {
		cfg.TraceFlags = parent.TraceFlags() | trace.FlagsSampled
	} else {
		cfg.TraceFlags = parent.TraceFlags() &^ trace.FlagsSampled
		return nil, trace.NewSpanContext(cfg)
	}
	s := newLeanSpan()
	s.lt = lt
	s.sc = trace.NewSpanContext(cfg)
	s.parent = parent
	s.kind = kind
	s.name, s.nameDest = name, nameDest
	s.start = start.UnixNano()
	s.system = lt.system
	return s, s.sc
}

// setMessageLocked is setMessage with s locked and open.
func (s *leanSpan) setMessageLocked(opType string, m *Message, body bool) {
	s.opType = opType
	if m.Operation != "" {
		s.opName = m.Operation
	}
	if m.Destination != "" {
		s.dest = m.Destination
	}
	if m.ID != "" {
		s.msgID, s.msgIDPrefix, s.msgIDNum = m.ID, "", 0
	} else if m.IDNum != 0 {
		s.msgID, s.msgIDPrefix, s.msgIDNum = "", m.IDPrefix, m.IDNum
	}
	if m.ConversationID != "" {
		s.convID = m.ConversationID
	}
	if body {
		s.bodySize = int64(m.BodySize)
		s.has |= hasBodySize
	}
	if m.ServerAddress != "" {
		s.serverAddr = m.ServerAddress
	}
	if m.ServerPort != 0 {
		s.serverPort = int64(m.ServerPort)
		s.has |= hasServerPort
	}
}

// setDelivery sets what deliveryAttrs sets on the SDK path.
func (s *leanSpan) setDelivery(m *Message, at time.Time) {
	if m.Attempt > 0 {
		s.attempt = int64(m.Attempt)
		s.has |= hasAttempt
	}
	if !m.Enqueued.IsZero() {
		s.queueWait = max(at.Sub(m.Enqueued), 0).Milliseconds()
		s.has |= hasQueueWait
	}
}

// receive records a receive span on the lean path; see Tracer.Receive.
func (lt *leanTracer) receive(ctx context.Context, c Creation, m *Message) {
	// One clock reading serves as the end, the queue wait's reference and,
	// without m.Start, the start: reading the clock is a good part of a
	// span's cost.
	lt.receiveAt(spanParent(ctx, c), c.IsValid(), m, leanTime())
}

// spanParent is the parent of a receive or process span: the creation
// context, or ctx's span when c is zero.
func spanParent(ctx context.Context, c Creation) trace.SpanContext {
	if c.IsValid() {
		return c.SpanContext()
	}
	return trace.SpanContextFromContext(ctx)
}

// receiveAt records a receive span under parent (linked to it when link)
// that ends at now.
func (lt *leanTracer) receiveAt(parent trace.SpanContext, link bool, m *Message, now time.Time) {
	start := m.Start
	if start.IsZero() {
		start = now
	}
	s, _ := lt.startSpan(parent, "receive", m.Destination, trace.SpanKindClient, start)
	if s == nil {
		return
	}
	// The record is still only ours (startSpan's): no lock until it ends.
	s.setMessageLocked(semconv.MessagingOperationTypeReceive.Value.AsString(), m, true)
	s.setDelivery(m, now)
	s.linkParent = link
	s.ended, s.end = true, now.UnixNano()
	s.lt.pipe.enqueue(s)
}

// process starts a process span on the lean path; see
// Tracer.StartProcess. The record is nil when the span is not recorded.
func (lt *leanTracer) process(ctx context.Context, c Creation, m *Message) (*leanSpan, trace.SpanContext) {
	return lt.processAt(spanParent(ctx, c), m, leanTime())
}

// processAt starts a process span under parent at start.
func (lt *leanTracer) processAt(parent trace.SpanContext, m *Message, start time.Time) (*leanSpan, trace.SpanContext) {
	s, sc := lt.startSpan(parent, "process", m.Destination, trace.SpanKindConsumer, start)
	if s != nil {
		// Not handed out yet: no lock needed.
		s.setMessageLocked(semconv.MessagingOperationTypeProcess.Value.AsString(), m, false)
		s.setDelivery(m, start)
		if m.Attempt > 1 {
			s.addEventLocked(EventRetry, start, []attribute.KeyValue{AttrAttempt.Int(m.Attempt)})
		}
	}
	return s, sc
}

// addEvent records an event without the API's option boxing.
func (s *leanSpan) addEvent(name string, at time.Time, attrs ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEventLocked(name, at, attrs)
	}
}

// addEventLocked is addEvent with s locked and open.
func (s *leanSpan) addEventLocked(name string, at time.Time, attrs []attribute.KeyValue) {
	e := leanEvent{name: name, time: at}
	e.n = copy(e.attrs[:], attrs)
	if len(attrs) > e.n {
		e.more = append([]attribute.KeyValue(nil), attrs[e.n:]...)
	}
	s.events = append(s.events, e)
}

// End ends the span and queues it for export; later calls do nothing.
func (s *leanSpan) End(options ...trace.SpanEndOption) {
	end := leanTime()
	if len(options) > 0 {
		cfg := trace.NewSpanEndConfig(options...)
		if ts := cfg.Timestamp(); !ts.IsZero() {
			end = ts
		}
	}
	s.endAt(end)
}

// endAt ends the span at end and queues it; later calls do nothing.
func (s *leanSpan) endAt(end time.Time) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.end = end.UnixNano()
	s.mu.Unlock()
	s.lt.pipe.enqueue(s)
}

// AddEvent records an event, as the SDK does.
func (s *leanSpan) AddEvent(name string, options ...trace.EventOption) {
	cfg := trace.NewEventConfig(options...)
	at := cfg.Timestamp()
	if at.IsZero() {
		at = leanTime()
	}
	s.addEvent(name, at, cfg.Attributes()...)
}

// AddLink adds a link to a valid span context. The lean span keeps one
// link, which is all jobgate makes; a second replaces the first.
func (s *leanSpan) AddLink(link trace.Link) {
	if !link.SpanContext.IsValid() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.linkParent, s.link = false, &link.SpanContext
	}
}

// IsRecording reports whether the span is still open.
func (s *leanSpan) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// RecordError records err as an "exception" event, as the SDK does.
func (s *leanSpan) RecordError(err error, options ...trace.EventOption) {
	if err == nil {
		return
	}
	options = append(options, trace.WithAttributes(
		semconv.ExceptionType(errorType(err)),
		semconv.ExceptionMessage(err.Error())))
	s.AddEvent(semconv.ExceptionEventName, options...)
}

// errorType names err's type the way the SDK does for exception.type.
func errorType(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

// SpanContext returns the span's context.
func (s *leanSpan) SpanContext() trace.SpanContext { return s.sc }

// SetStatus sets the status with the SDK's precedence: Ok is final, Unset
// changes nothing, and only Error keeps a description.
func (s *leanSpan) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || code == codes.Unset || s.status == codes.Ok {
		return
	}
	s.status = code
	s.statusDesc = ""
	if code == codes.Error {
		s.statusDesc = description
	}
}

// SetName renames the span.
func (s *leanSpan) SetName(name string) { s.setName(name, "") }

// setName names the span name + " " + dest, or name when dest is empty.
func (s *leanSpan) setName(name, dest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.name, s.nameDest = name, dest
	}
}

// setAttr sets one attribute on span; on a lean span without the
// interface call, through which the variadic argument would escape to
// the heap.
func setAttr(span trace.Span, kv attribute.KeyValue) {
	if s, ok := span.(*leanSpan); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.ended && kv.Valid() {
			s.setAttr(kv)
		}
		return
	}
	span.SetAttributes(kv)
}

// SetAttributes sets attributes, the last value of a key winning as in the
// SDK. Jobgate's own keys land in their typed fields.
func (s *leanSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	for _, a := range kv {
		if a.Valid() {
			s.setAttr(a)
		}
	}
}

// setAttr stores a in its typed field when it has the expected type, and
// in extra otherwise (clearing the typed field, so a key appears once).
func (s *leanSpan) setAttr(a attribute.KeyValue) {
	str := a.Value.Type() == attribute.STRING
	i64 := a.Value.Type() == attribute.INT64
	var sp *string
	var ip *int64
	var bit uint8
	switch a.Key {
	case semconv.MessagingSystemKey:
		sp = &s.system
	case semconv.MessagingOperationTypeKey:
		sp = &s.opType
	case semconv.MessagingOperationNameKey:
		sp = &s.opName
	case semconv.MessagingDestinationNameKey:
		sp = &s.dest
	case semconv.MessagingMessageIDKey:
		sp = &s.msgID
		s.msgIDPrefix, s.msgIDNum = "", 0 // the attribute replaces a numeric id
	case semconv.MessagingMessageConversationIDKey:
		sp = &s.convID
	case semconv.ServerAddressKey:
		sp = &s.serverAddr
	case AttrOutcome:
		sp = &s.outcome
	case semconv.ErrorTypeKey:
		sp = &s.errType
	case semconv.MessagingMessageBodySizeKey:
		ip, bit = &s.bodySize, hasBodySize
	case semconv.ServerPortKey:
		ip, bit = &s.serverPort, hasServerPort
	case AttrAttempt:
		ip, bit = &s.attempt, hasAttempt
	case AttrQueueWait:
		ip, bit = &s.queueWait, hasQueueWait
	}
	switch {
	case sp != nil && str && a.Value.AsString() != "":
		*sp = a.Value.AsString()
		s.dropExtra(a.Key)
		return
	case ip != nil && i64:
		*ip = a.Value.AsInt64()
		s.has |= bit
		s.dropExtra(a.Key)
		return
	case sp != nil:
		*sp = ""
	case ip != nil:
		s.has &^= bit
	}
	for i := range s.extra {
		if s.extra[i].Key == a.Key {
			s.extra[i] = a
			return
		}
	}
	s.extra = append(s.extra, a)
}

func (s *leanSpan) dropExtra(k attribute.Key) {
	for i := range s.extra {
		if s.extra[i].Key == k {
			s.extra = append(s.extra[:i], s.extra[i+1:]...)
			return
		}
	}
}

// TracerProvider returns the Provider's SDK tracer provider.
func (s *leanSpan) TracerProvider() trace.TracerProvider { return s.lt.pipe.tp }

// unsampledSpan is a span the sampler dropped: it carries its context, so
// the job's later spans share the decision, and records nothing.
type unsampledSpan struct {
	embedded.Span
	sc trace.SpanContext
}

// unsampled is the span of a Send or Process whose span the lean path did
// not record. It is one shared value: the handle keeps the span's context
// (cr, ts) and rebuilds the span from it when asked (Span), where an
// unsampledSpan boxed in the handle cost every unsampled job an
// allocation of 80 bytes per span. A pointer, so that handles compare
// their span with it (unsampledSpan, holding a trace state, is not
// comparable).
var unsampled trace.Span = &unsampledSpan{}

// leanHandleSpan is what a lean handle keeps as its span for record s
// (nil: not recorded) with context sc: s; or unsampled, the handle
// keeping sc's ids, and its trace state when keepsTraceState; or, with a
// trace state the handle cannot keep (Send), a boxed unsampledSpan.
func leanHandleSpan(s *leanSpan, sc trace.SpanContext, keepsTraceState bool) trace.Span {
	switch {
	case s != nil:
		return s
	case keepsTraceState || sc.TraceState().Len() == 0:
		return unsampled
	}
	return unsampledSpan{sc: sc}
}

func (unsampledSpan) End(...trace.SpanEndOption)              {}
func (unsampledSpan) AddEvent(string, ...trace.EventOption)   {}
func (unsampledSpan) AddLink(trace.Link)                      {}
func (unsampledSpan) IsRecording() bool                       { return false }
func (unsampledSpan) RecordError(error, ...trace.EventOption) {}
func (u unsampledSpan) SpanContext() trace.SpanContext        { return u.sc }
func (unsampledSpan) SetStatus(codes.Code, string)            {}
func (unsampledSpan) SetName(string)                          {}
func (unsampledSpan) SetAttributes(...attribute.KeyValue)     {}
func (unsampledSpan) TracerProvider() trace.TracerProvider    { return noop.NewTracerProvider() }
