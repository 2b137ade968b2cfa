package tracing

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of jobgate's spans.
const ScopeName = "github.com/jobgate/jobgate/tracing"

// System is the messaging.system of a span: which protocol the job came in
// by. Neither is a well-known value of the conventions; custom values are
// allowed and these are the obvious ones.
type System string

// The two messaging systems jobgate speaks.
const (
	Gearman   System = "gearman"
	Beanstalk System = "beanstalk"
)

// Attribute keys jobgate adds to the messaging conventions.
// They live under "jobgate." so they cannot collide with future conventions.
const (
	// AttrQueueWait is how long the job waited between becoming ready
	// (submit, put, release) and being handed to a worker, in whole
	// milliseconds. On receive and process spans; absent when unknown.
	AttrQueueWait = attribute.Key("jobgate.queue.wait_ms")
	// AttrAttempt is which delivery of the job this is, from 1. On receive
	// and process spans when the caller knows it.
	AttrAttempt = attribute.Key("jobgate.job.attempt")
	// AttrOutcome is how a process span ended: one of the Outcome* values.
	AttrOutcome = attribute.Key("jobgate.job.outcome")
	// AttrNumerator and AttrDenominator are a WORK_STATUS event's progress,
	// verbatim (Gearman sends them as text).
	AttrNumerator   = attribute.Key("jobgate.work.numerator")
	AttrDenominator = attribute.Key("jobgate.work.denominator")
	// AttrDelay and AttrPriority describe a release or bury.
	AttrDelay    = attribute.Key("jobgate.job.delay_ms")
	AttrPriority = attribute.Key("jobgate.job.priority")
)

// Event names on process spans. Protocol commands keep their wire spelling
// (upper case for Gearman, lower case for Beanstalk) so they read like the
// protocol; the rest are jobgate's.
const (
	EventWorkStatus  = "WORK_STATUS"
	EventWorkData    = "WORK_DATA"
	EventWorkWarning = "WORK_WARNING"
	EventTouch       = "touch"
	EventRelease     = "release"
	EventBury        = "bury"
	EventTTRExpired  = "ttr_expired"
	EventRetry       = "retry"
)

// Outcomes of a process span (AttrOutcome), and the error.type values the
// failing ones carry. Failures reported by the worker use the protocol
// command as error.type (WORK_FAIL, WORK_EXCEPTION).
const (
	OutcomeCompleted  = "completed"   // WORK_COMPLETE, delete
	OutcomeFailed     = "failed"      // WORK_FAIL, WORK_EXCEPTION, worker lost, ...
	OutcomeReleased   = "released"    // release: back to the queue, not an error
	OutcomeBuried     = "buried"      // bury: error.type "bury"
	OutcomeTTRExpired = "ttr_expired" // TTR ran out: error.type "ttr_expired"
	OutcomeEvicted    = "evicted"     // dropped from a full Table: error.type "evicted"

	ErrorWorkerLost = "worker_lost" // the worker's connection closed mid-job
)

// Message describes one job operation as the proxy sees it. Fields left
// zero are left out of the span, except BodySize on send and receive, where
// an empty body is a real size.
type Message struct {
	// Operation is the protocol command: "SUBMIT_JOB_BG", "JOB_ASSIGN_UNIQ",
	// "put", "reserve-with-timeout", ... (messaging.operation.name).
	Operation string
	// Destination is the Gearman function or Beanstalk tube
	// (messaging.destination.name, and the span name's suffix).
	Destination string
	// ID is the job handle or id as the client sees it
	// (messaging.message.id). Unknown at submit; see [Send.Created].
	ID string
	// IDPrefix and IDNum give the id as a prefix and a decimal number
	// (a Gearman handle's "H:host:" and job number, a Beanstalk id with no
	// prefix) when ID is empty and IDNum is not 0. On the lean path the
	// string is then built only when the span is exported, off the data
	// path; the exported attribute is the same.
	IDPrefix string
	IDNum    uint64
	// ConversationID is the Gearman unique id
	// (messaging.message.conversation_id).
	ConversationID string
	// BodySize is the payload length in bytes (messaging.message.body.size).
	BodySize int
	// ServerAddress and ServerPort name the backend that holds the job
	// (server.address, server.port); empty for the local engine.
	ServerAddress string
	ServerPort    int
	// Enqueued is when the job last became ready (submit, put, release
	// delay end), for AttrQueueWait. Zero when unknown.
	Enqueued time.Time
	// Attempt is which delivery this is, from 1 (Beanstalk's reserves
	// count); 0 when unknown. A process span for attempt 2 or more gets a
	// "retry" event.
	Attempt int
	// Start is when the operation began: when the client sent the submit
	// (StartSend) or the worker sent GRAB_JOB or reserve (Receive); zero
	// means now. A receive span is started once the job is known, with this
	// as its start time, so a long poll shows as a long receive span.
	// StartProcess ignores it: processing starts at the assignment, now.
	Start time.Time
}

// id is the message id as a string: ID, or IDPrefix and IDNum joined.
func (m *Message) id() string {
	if m.ID != "" || m.IDNum == 0 {
		return m.ID
	}
	return m.IDPrefix + strconv.FormatUint(m.IDNum, 10)
}

// Tracer makes the spans of job lifecycles for one messaging system. Build
// one per system with [Provider.Tracer] or [NewTracer] and share it. A nil
// *Tracer is valid and makes no-op spans, so the data path need not check
// whether tracing is on. Safe for concurrent use.
type Tracer struct {
	tracer   trace.Tracer
	lean     *leanTracer // job spans bypass the SDK (lean_span.go); nil: SDK
	system   attribute.KeyValue
	commands bool
	payload  bool
}

// NewTracer returns a Tracer on tp for sys, with the CommandSpans and
// PayloadTraceparent switches of cfg. Tests pass an SDK provider with a
// tracetest.SpanRecorder here.
func NewTracer(tp trace.TracerProvider, sys System, cfg Config) *Tracer {
	return &Tracer{
		tracer: tp.Tracer(ScopeName,
			trace.WithInstrumentationVersion("1"),
			trace.WithSchemaURL(semconv.SchemaURL)),
		system:   semconv.MessagingSystemKey.String(string(sys)),
		commands: cfg.CommandSpans,
		payload:  cfg.PayloadTraceparent,
	}
}

// attrs builds the span attributes common to every job span. It appends to
// a caller's stack array so the common case does not allocate.
func (t *Tracer) attrs(dst []attribute.KeyValue, op attribute.KeyValue, m *Message, body bool) []attribute.KeyValue {
	dst = append(dst, t.system, op)
	if m.Operation != "" {
		dst = append(dst, semconv.MessagingOperationName(m.Operation))
	}
	if m.Destination != "" {
		dst = append(dst, semconv.MessagingDestinationName(m.Destination))
	}
	if id := m.id(); id != "" {
		dst = append(dst, semconv.MessagingMessageID(id))
	}
	if m.ConversationID != "" {
		dst = append(dst, semconv.MessagingMessageConversationID(m.ConversationID))
	}
	if body {
		dst = append(dst, semconv.MessagingMessageBodySize(m.BodySize))
	}
	if m.ServerAddress != "" {
		dst = append(dst, semconv.ServerAddress(m.ServerAddress))
	}
	if m.ServerPort != 0 {
		dst = append(dst, semconv.ServerPort(m.ServerPort))
	}
	return dst
}

// deliveryAttrs adds what receive and process spans share: attempt and
// queue wait.
func deliveryAttrs(dst []attribute.KeyValue, m *Message, start time.Time) []attribute.KeyValue {
	if m.Attempt > 0 {
		dst = append(dst, AttrAttempt.Int(m.Attempt))
	}
	if !m.Enqueued.IsZero() {
		dst = append(dst, AttrQueueWait.Int64(max(start.Sub(m.Enqueued), 0).Milliseconds()))
	}
	return dst
}

// spanName is "<operation type> <destination>", as DESIGN.md decision 7
// names them. (The conventions suggest the operation name instead; the type
// keeps one name for Gearman's six SUBMIT variants, so Jaeger groups them.)
func spanName(opType, dest string) string {
	if dest == "" {
		return opType
	}
	return opType + " " + dest
}

func startTime(m *Message) time.Time {
	if m.Start.IsZero() {
		return time.Now()
	}
	return m.Start
}

// StartSend starts the PRODUCER span `send <destination>` when a client
// submits a job (SUBMIT_JOB*, put). Its creation context is available at
// once ([Send.Creation]) for the engine to store with the job. The span is
// a child of any span in ctx, else a new trace's root. End it with
// [Send.Created] when the server acknowledges (JOB_CREATED, INSERTED), or
// with [Send.Fail].
func (t *Tracer) StartSend(ctx context.Context, m Message) Send {
	if t == nil {
		return Send{}
	}
	if t.lean != nil {
		s := t.leanSend(ctx, m.Destination, m.Start)
		if s.Recording() {
			s.setAttrs(&m)
		}
		return s
	}
	_, span := t.tracer.Start(ctx, spanName("send", m.Destination),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(startTime(&m)))
	s := Send{span: span, t: t}
	// Attributes after the start: the samplers jobgate offers do not look
	// at them, and an unsampled job then costs no attribute work.
	if span.IsRecording() {
		s.setAttrs(&m)
	}
	return s
}

// StartSendBare starts the send span like StartSend, at start (zero: now),
// but with no name suffix and no attributes: when [Send.Recording], give
// them with [Send.Describe]. It lets the proxy skip copying a job's
// function, unique id and such for the jobs that are not sampled.
func (t *Tracer) StartSendBare(ctx context.Context, start time.Time) Send {
	if t == nil {
		return Send{}
	}
	if t.lean != nil {
		return t.leanSend(ctx, "", start)
	}
	if start.IsZero() {
		start = time.Now()
	}
	_, span := t.tracer.Start(ctx, "send",
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(start))
	return Send{span: span, t: t}
}

// leanSend starts a send span on the lean path, with its handle, at
// start (zero: now).
func (t *Tracer) leanSend(ctx context.Context, dest string, start time.Time) Send {
	if start.IsZero() {
		start = leanTime()
	}
	var parent trace.SpanContext
	if ctx != context.Background() { // the proxy's: no look-up through the context's interface
		parent = trace.SpanContextFromContext(ctx)
	}
	ls, sc := t.lean.startSpan(parent, "send", dest, trace.SpanKindProducer, start)
	s := Send{span: leanHandleSpan(ls, sc, false), t: t, cr: CreationOf(sc)}
	if ls != nil {
		s.gen = ls.gen
	}
	return s
}

func (s Send) setAttrs(m *Message) {
	if ls, ok := s.span.(*leanSpan); ok {
		ls.describe(s.gen, m)
		return
	}
	var buf [10]attribute.KeyValue
	s.span.SetAttributes(s.t.attrs(buf[:0], semconv.MessagingOperationTypeSend, m, true)...)
}

// Recording reports whether the send span is recorded: the job is sampled.
func (s Send) Recording() bool {
	if ls, ok := s.span.(*leanSpan); ok {
		return ls.recording(s.gen)
	}
	return s.span != nil && s.span.IsRecording()
}

// Describe names the span after m.Destination and sets m's attributes, for
// a span started with [Tracer.StartSendBare]. It does nothing unless
// recording.
func (s Send) Describe(m Message) {
	if ls, ok := s.span.(*leanSpan); ok {
		ls.describe(s.gen, &m) // does nothing unless open: one lock, not two
		return
	}
	if !s.Recording() {
		return
	}
	s.span.SetName(spanName("send", m.Destination))
	s.setAttrs(&m)
}

// Receive records the CLIENT span `receive <destination>` for handing a job
// to a worker (JOB_ASSIGN*, RESERVED), from m.Start to now. It is linked to
// the creation context, as the conventions prescribe, and also parented to
// it: the proxy has no worker-side span to parent it to, and parenting keeps
// one job in one trace, sampled as the producer decided. With a zero c it is
// a root span of its own trace.
func (t *Tracer) Receive(ctx context.Context, c Creation, m Message) {
	if t == nil {
		return
	}
	if t.lean != nil {
		t.lean.receive(ctx, c, &m)
		return
	}
	start := startTime(&m)
	var buf [12]attribute.KeyValue
	a := t.attrs(buf[:0], semconv.MessagingOperationTypeReceive, &m, true)
	a = deliveryAttrs(a, &m, time.Now())
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start),
		trace.WithAttributes(a...),
	}
	if c.IsValid() {
		sc := c.SpanContext()
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := t.tracer.Start(ctx, spanName("receive", m.Destination), opts...)
	span.End()
}

// StartProcess starts the CONSUMER span `process <destination>` when a job
// is assigned to a worker. It is a child of the creation context (of ctx
// when c is zero), so the worker's processing nests under the submit in
// Jaeger. Keep the returned Process with the reservation (see [Table]),
// add events as the worker reports, and end it with one of its ending
// methods. The returned context carries the span, for child spans.
func (t *Tracer) StartProcess(ctx context.Context, c Creation, m Message) (context.Context, Process) {
	if t == nil {
		return ctx, Process{}
	}
	if t.lean != nil {
		ls, sc := t.lean.process(ctx, c, &m)
		p := leanProcess(ls, sc)
		if ls == nil {
			return trace.ContextWithSpan(ctx, unsampledSpan{sc: sc}), p
		}
		return &leanCtx{Context: ctx, s: ls, gen: p.gen, cr: p.cr, ts: p.ts}, p
	}
	ctx = ContextWithCreation(ctx, c)
	start := time.Now()
	var buf [12]attribute.KeyValue
	a := t.attrs(buf[:0], semconv.MessagingOperationTypeProcess, &m, false)
	a = deliveryAttrs(a, &m, start)
	ctx, span := t.tracer.Start(ctx, spanName("process", m.Destination),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(start),
		trace.WithAttributes(a...))
	if m.Attempt > 1 {
		span.AddEvent(EventRetry, trace.WithTimestamp(start),
			trace.WithAttributes(AttrAttempt.Int(m.Attempt)))
	}
	return ctx, Process{span: span}
}

// Send is an open PRODUCER span. The zero Send (tracing off) is valid and
// does nothing. Send is a small value; copy it freely.
type Send struct {
	span trace.Span
	t    *Tracer
	// On the lean path: the record's generation, and the span's context,
	// which outlives the record (lean_recycle.go).
	gen uint32
	cr  Creation
}

// Span returns the underlying span, or a no-op span for the zero Send.
func (s Send) Span() trace.Span {
	if s.span == nil {
		return trace.SpanFromContext(context.Background())
	}
	if ls, ok := s.span.(*leanSpan); ok {
		return ls.pin(s.gen, s.cr.spanContext(nil))
	}
	if s.span == unsampled {
		return unsampledSpan{sc: s.cr.spanContext(nil)}
	}
	return s.span
}

// Creation returns the job's creation context: store it with the job
// (engine, journal, Table) and pass it to Receive and StartProcess later.
// It is the zero Creation when tracing is off.
func (s Send) Creation() Creation {
	if s.span == nil {
		return Creation{}
	}
	if s.t != nil && s.t.lean != nil {
		return s.cr
	}
	return CreationOf(s.span.SpanContext())
}

// Created records the id or handle the server assigned and ends the span.
func (s Send) Created(id string) {
	if s.span == nil || s.span == unsampled {
		return
	}
	var a attribute.KeyValue
	if id != "" {
		a = semconv.MessagingMessageID(id)
	}
	if ls, ok := s.span.(*leanSpan); ok {
		ls.endWith(s.gen, a, false, "")
		return
	}
	if a.Valid() {
		setAttr(s.span, a)
	}
	s.span.End()
}

// CreatedNum is Created for the id prefix followed by n in decimal (see
// [Message.IDNum]): on the lean path the string is built off the data
// path, when the span is exported. n = 0 records no id.
func (s Send) CreatedNum(prefix string, n uint64) {
	if ls, ok := s.span.(*leanSpan); ok {
		ls.endWithNum(s.gen, prefix, n)
		return
	}
	if s.span == nil || s.span == unsampled {
		return
	}
	m := Message{IDPrefix: prefix, IDNum: n}
	s.Created(m.id())
}

// Fail ends the span as failed with error.type errType: the reply token
// (JOB_TOO_BIG, DRAINING, EXPECTED_CRLF, a Gearman ERROR code) or a
// jobgate reason such as "timeout" or "backend_unavailable".
func (s Send) Fail(errType string) {
	if ls, ok := s.span.(*leanSpan); ok {
		ls.endWith(s.gen, attribute.KeyValue{}, true, errType)
		return
	}
	if s.span == unsampled {
		return
	}
	failEnd(s.span, errType)
}

// End ends the span without recording an outcome.
func (s Send) End() {
	if ls, ok := s.span.(*leanSpan); ok {
		ls.endWith(s.gen, attribute.KeyValue{}, false, "")
		return
	}
	if s.span != nil {
		s.span.End()
	}
}

// CommandSpans reports whether admin and stats commands get spans (the
// Config switch). Check it before building a Message for StartCommand.
func (t *Tracer) CommandSpans() bool { return t != nil && t.commands }

// StartCommand starts a SERVER span named after m.Operation for one admin or
// stats command (stats, stats-tube, list-tubes, Gearman's text "status",
// ...) when the CommandSpans switch is on; otherwise it returns ctx and a
// no-op Command. End it with [Command.End].
func (t *Tracer) StartCommand(ctx context.Context, m Message) (context.Context, Command) {
	if !t.CommandSpans() {
		return ctx, Command{}
	}
	var buf [8]attribute.KeyValue
	a := append(buf[:0], t.system, semconv.MessagingOperationName(m.Operation))
	if m.Destination != "" {
		a = append(a, semconv.MessagingDestinationName(m.Destination))
	}
	if m.ServerAddress != "" {
		a = append(a, semconv.ServerAddress(m.ServerAddress))
	}
	if m.ServerPort != 0 {
		a = append(a, semconv.ServerPort(m.ServerPort))
	}
	ctx, span := t.tracer.Start(ctx, m.Operation,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(startTime(&m)),
		trace.WithAttributes(a...))
	return ctx, Command{span: span}
}

// Command is an open admin or stats command span; the zero Command does
// nothing.
type Command struct{ span trace.Span }

// End ends the span; a non-empty errType (the error reply, e.g. NOT_FOUND)
// marks it failed.
func (c Command) End(errType string) {
	if c.span == nil {
		return
	}
	if errType != "" {
		failEnd(c.span, errType)
		return
	}
	c.span.End()
}
