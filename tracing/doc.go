// Package tracing gives every job that passes through jobgate one trace, in
// OpenTelemetry's messaging conventions, exported over OTLP (Jaeger reads
// OTLP natively). It imports only OpenTelemetry (API, SDK, OTLP exporters
// and protos), protobuf and the standard library.
//
// # Setting up
//
// [New] builds a [Provider] from a [Config] completed by the standard OTEL_*
// variables (precedence on [Config]). [Provider.Tracer] gives a [*Tracer] per
// protocol; with tracing off that is nil, and a nil *Tracer makes no-op spans,
// so the data path never branches on whether tracing is on. Finished spans go
// to a bounded queue that drops, and counts ([Provider.Dropped]), rather
// than block; failed exports are counted too ([Provider.ExportFailed]). At
// exit, end the spans of jobs in flight ([Table.EndOpen]), then
// [Provider.Shutdown] flushes the queue.
//
// # One job, one trace
//
//	client ── SUBMIT/put ──> send <name>      PRODUCER  root (or child of the client's span)
//	worker ── assign/reserve ──> receive <name> CLIENT  child of send, linked to send
//	                       └─> process <name>  CONSUMER child of send, until the outcome
//
// The send span's context, the job's [Creation], is 26 bytes that an engine
// stores with the job and journals, so the trace continues after a restart.
// For jobs on upstream servers, which store nothing of ours, the proxy keeps
// it in a [Table] keyed by the client-visible handle or id.
//
// # What the proxy calls, per job event
//
// Submit (SUBMIT_JOB*, put), on the client's session:
//
//	s := tr.StartSend(ctx, tracing.Message{Operation: "SUBMIT_JOB_BG",
//		Destination: fn, ConversationID: unique, BodySize: len(body),
//		ServerAddress: host, ServerPort: port})
//	creation := s.Creation() // local engine: store with the job
//
// On the data path, where the Message's strings would be copies of the
// request's buffers, start with [Tracer.StartSendBare] and build the
// Message for [Send.Describe] only if [Send.Recording]: a job the sampler
// drops then copies nothing, and its creation context need not be stored.
//
// Acknowledged (JOB_CREATED, INSERTED id): s.Created(handle); for an
// upstream job also table.Put(handle, tracing.Entry{Creation: creation,
// Enqueued: time.Now()}). Refused (ERROR, JOB_TOO_BIG, DRAINING, backend
// down): s.Fail(token). Where the id is a prefix and a number (a local
// engine's handle or id), s.CreatedNum(prefix, n) and Message.IDPrefix
// with IDNum leave formatting it to the export goroutine.
//
// Assignment (JOB_ASSIGN*, RESERVED), on the worker's session; the creation
// context comes from the engine's job or the table entry:
//
//	m := tracing.Message{Operation: "JOB_ASSIGN", Destination: fn, ID: handle,
//		BodySize: len(body), Enqueued: e.Enqueued, Attempt: e.Attempts + 1,
//		Start: grabSentAt}
//	tr.Receive(ctx, e.Creation, m)
//	_, p := tr.StartProcess(ctx, e.Creation, m)
//	table.Update(handle, func(e *tracing.Entry) { e.Attempts++; e.Process = p })
//	body, _ = tr.WrapPayload(buf[:0], p.SpanContext(), body) // no-op unless switched on
//
// While the worker holds it: WORK_STATUS → p.Status(num, den); WORK_DATA →
// p.Data(len(data)); WORK_WARNING → p.Warning(len(data)); touch → p.Touch().
//
// Outcome: WORK_COMPLETE or delete → p.Complete(); WORK_FAIL →
// p.Fail("WORK_FAIL"); WORK_EXCEPTION → p.Fail("WORK_EXCEPTION"); bury →
// p.Bury(pri); worker connection lost → p.Fail(tracing.ErrorWorkerLost);
// TTR expiry → p.TTRExpired(). After a final outcome, table.Delete(handle).
// Release → p.Release(pri, delay), then keep the entry with Process cleared
// and Enqueued set to now+delay: the next reservation is another
// receive/process pair in the same trace, marked with a retry event.
//
// Admin and stats commands: if tr.CommandSpans() { _, c := tr.StartCommand(
// ctx, m); ...; c.End(errToken) }.
//
// # Two span paths
//
// The job spans a [Provider]'s Tracers make (send, receive, process) take a
// lean path (lean_*.go): one fixed-layout record per span, recycled once
// exported (the Send and Process handles carry a generation, so a handle
// used after its span ended does nothing), the messaging attributes as
// typed fields, a bounded queue of their own, and a
// background goroutine that encodes each batch as OTLP protobuf directly
// and uploads it: over gRPC with the OTLP exporter's client, over HTTP
// with a sender of its own that posts the encoded batch without the
// client's copy (lean_http.go), written and answered on one kept-alive
// connection by the export goroutine itself, with no net/http goroutines
// to wake (lean_http_conn.go; through net/http behind a proxy); both
// honour the exporter environment variables, TLS, retries and
// compression. It costs a
// fifth of the SDK's CPU per job and a tenth of its allocations (see
// docs/BENCHMARKS.md, "Tracing"). Ids, sampling, flags and span content
// follow the SDK rule for rule; tests compare the encoding with the SDK's
// OTLP exporter and the sampler decisions with the SDK's samplers. Command
// spans, and spans of any library given [Provider.TracerProvider], take the
// SDK path. [NewTracer] on any tracer provider always takes the SDK path;
// [NewSyncTracer] takes the lean path and decodes each span back for a
// span processor, which is how the tests see lean spans.
//
// # Names
//
// Spans are "send|receive|process <function or tube>". Attributes are the
// conventions' messaging.system ("gearman", "beanstalk"),
// messaging.operation.name (the protocol command), messaging.operation.type,
// messaging.destination.name, messaging.message.id (handle or id),
// messaging.message.conversation_id (Gearman unique),
// messaging.message.body.size, server.address, server.port and error.type,
// plus jobgate's own under "jobgate." ([AttrQueueWait] and the other Attr*
// constants). Semantic conventions: go.opentelemetry.io/otel/semconv/v1.43.0.
package tracing
