package tracing

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestGearmanForeground follows a foreground job through the calls the
// proxy makes: SUBMIT_JOB, JOB_CREATED, JOB_ASSIGN_UNIQ, WORK_STATUS,
// WORK_DATA, WORK_WARNING, WORK_COMPLETE.
func TestGearmanForeground(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	ctx := context.Background()

	s := tr.StartSend(ctx, Message{
		Operation: "SUBMIT_JOB", Destination: "resize", ConversationID: "img-42",
		BodySize: 5, ServerAddress: "gm1.internal", ServerPort: 4730,
	})
	c := s.Creation()
	if !c.IsValid() || !c.IsSampled() {
		t.Fatalf("creation %v: want a valid, sampled context", c)
	}
	s.Created("H:gm1:17")

	assign := Message{
		Operation: "JOB_ASSIGN_UNIQ", Destination: "resize", ID: "H:gm1:17",
		ConversationID: "img-42", BodySize: 5, ServerAddress: "gm1.internal", ServerPort: 4730,
		Enqueued: time.Now().Add(-1500 * time.Millisecond), Attempt: 1,
		Start: time.Now().Add(-2 * time.Second), // GRAB_JOB long before
	}
	tr.Receive(ctx, c, assign)
	pctx, p := tr.StartProcess(ctx, c, assign)
	if !trace.SpanContextFromContext(pctx).Equal(p.SpanContext()) || !p.IsOpen() {
		t.Fatal("StartProcess: returned context does not carry the process span")
	}
	p.Status("1", "4")
	p.Data(3)
	p.Warning(7)
	p.Complete()

	common := map[string]any{
		"messaging.system":                  "gearman",
		"messaging.destination.name":        "resize",
		"messaging.message.conversation_id": "img-42",
		"server.address":                    "gm1.internal",
		"server.port":                       int64(4730),
	}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range common {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	spans := rec.Ended()
	checkSpans(t, spans, []wantSpan{
		{
			name: "send resize", kind: trace.SpanKindProducer,
			attrs: with(map[string]any{
				"messaging.operation.name":    "SUBMIT_JOB",
				"messaging.operation.type":    "send",
				"messaging.message.body.size": int64(5),
				"messaging.message.id":        "H:gm1:17",
			}),
		},
		{
			name: "receive resize", kind: trace.SpanKindClient,
			parent: "send resize", links: []string{"send resize"},
			attrs: with(map[string]any{
				"messaging.operation.name":    "JOB_ASSIGN_UNIQ",
				"messaging.operation.type":    "receive",
				"messaging.message.body.size": int64(5),
				"messaging.message.id":        "H:gm1:17",
				"jobgate.job.attempt":         int64(1),
			}),
			waitAtLeast: 1500,
		},
		{
			name: "process resize", kind: trace.SpanKindConsumer, parent: "send resize",
			attrs: with(map[string]any{
				"messaging.operation.name": "JOB_ASSIGN_UNIQ",
				"messaging.operation.type": "process",
				"messaging.message.id":     "H:gm1:17",
				"jobgate.job.attempt":      int64(1),
				"jobgate.job.outcome":      "completed",
			}),
			waitAtLeast: 1500,
			events: []wantEvent{
				{"WORK_STATUS", map[string]any{"jobgate.work.numerator": "1", "jobgate.work.denominator": "4"}},
				{"WORK_DATA", map[string]any{"messaging.message.body.size": int64(3)}},
				{"WORK_WARNING", map[string]any{"messaging.message.body.size": int64(7)}},
			},
		},
	})
	// The receive span covers the wait since GRAB_JOB.
	if d := spans[1].EndTime().Sub(spans[1].StartTime()); d < 2*time.Second {
		t.Errorf("receive span lasts %v, want it to start at Message.Start", d)
	}
	if got := spans[0].InstrumentationScope().Name; got != ScopeName {
		t.Errorf("scope %q, want %q", got, ScopeName)
	}
}

// TestGearmanBackground is a background job on the local engine: no server
// address, no unique, a submit span that is the trace's root.
func TestGearmanBackground(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	ctx := context.Background()

	s := tr.StartSend(ctx, Message{Operation: "SUBMIT_JOB_BG", Destination: "mail", BodySize: 0})
	c := s.Creation()
	s.Created("H:local:1")
	m := Message{Operation: "JOB_ASSIGN", Destination: "mail", ID: "H:local:1", BodySize: 0}
	tr.Receive(ctx, c, m)
	_, p := tr.StartProcess(ctx, c, m)
	p.Complete()

	checkSpans(t, rec.Ended(), []wantSpan{
		{
			name: "send mail", kind: trace.SpanKindProducer,
			attrs: map[string]any{
				"messaging.system": "gearman", "messaging.operation.name": "SUBMIT_JOB_BG",
				"messaging.operation.type": "send", "messaging.destination.name": "mail",
				"messaging.message.body.size": int64(0), "messaging.message.id": "H:local:1",
			},
		},
		{
			name: "receive mail", kind: trace.SpanKindClient, parent: "send mail", links: []string{"send mail"},
			attrs: map[string]any{
				"messaging.system": "gearman", "messaging.operation.name": "JOB_ASSIGN",
				"messaging.operation.type": "receive", "messaging.destination.name": "mail",
				"messaging.message.body.size": int64(0), "messaging.message.id": "H:local:1",
			},
		},
		{
			name: "process mail", kind: trace.SpanKindConsumer, parent: "send mail",
			attrs: map[string]any{
				"messaging.system": "gearman", "messaging.operation.name": "JOB_ASSIGN",
				"messaging.operation.type": "process", "messaging.destination.name": "mail",
				"messaging.message.id": "H:local:1", "jobgate.job.outcome": "completed",
			},
		},
	})
}

// TestBeanstalkReleaseRetry drives an upstream beanstalk job through the
// Table as the proxy would: put, reserve, touch, release, reserve again,
// delete. Both rounds land in the one trace, the second marked as a retry.
func TestBeanstalkReleaseRetry(t *testing.T) {
	tr, rec := recorded(t, Beanstalk, Config{})
	ctx := context.Background()
	jobs := NewTable[uint64](16)
	const id = 1<<40 | 7 // an encoded, backend-qualified id

	s := tr.StartSend(ctx, Message{Operation: "put", Destination: "emails", BodySize: 11,
		ServerAddress: "bs1", ServerPort: 11300})
	s.Created("1099511627783")
	jobs.Put(id, Entry{Creation: s.Creation(), Enqueued: time.Now()})

	reserve := func() Process {
		e, ok := jobs.Get(id)
		if !ok {
			t.Fatal("job not in table")
		}
		m := Message{Operation: "reserve", Destination: "emails", ID: "1099511627783",
			BodySize: 11, Attempt: e.Attempts + 1, ServerAddress: "bs1", ServerPort: 11300}
		tr.Receive(ctx, e.Creation, m)
		_, p := tr.StartProcess(ctx, e.Creation, m)
		jobs.Update(id, func(e *Entry) { e.Attempts++; e.Process = p })
		return p
	}

	p := reserve()
	p.Touch()
	p.Release(1024, 2*time.Second)
	jobs.Update(id, func(e *Entry) { e.Process = Process{}; e.Enqueued = time.Now().Add(2 * time.Second) })

	reserve()
	e, ok := jobs.Delete(id)
	if !ok || e.Attempts != 2 {
		t.Fatalf("Delete: %+v %v, want attempts 2", e, ok)
	}
	e.Process.Complete()
	if jobs.Len() != 0 {
		t.Errorf("table holds %d entries after delete", jobs.Len())
	}

	base := map[string]any{
		"messaging.system": "beanstalk", "messaging.destination.name": "emails",
		"messaging.message.id": "1099511627783", "server.address": "bs1", "server.port": int64(11300),
	}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	receive := func(attempt int64) wantSpan {
		return wantSpan{
			name: "receive emails", kind: trace.SpanKindClient, parent: "send emails", links: []string{"send emails"},
			attrs: with(map[string]any{"messaging.operation.name": "reserve", "messaging.operation.type": "receive",
				"messaging.message.body.size": int64(11), "jobgate.job.attempt": attempt}),
		}
	}
	checkSpans(t, rec.Ended(), []wantSpan{
		{
			name: "send emails", kind: trace.SpanKindProducer,
			attrs: with(map[string]any{"messaging.operation.name": "put", "messaging.operation.type": "send",
				"messaging.message.body.size": int64(11)}),
		},
		receive(1),
		{
			name: "process emails", kind: trace.SpanKindConsumer, parent: "send emails",
			attrs: with(map[string]any{"messaging.operation.name": "reserve", "messaging.operation.type": "process",
				"jobgate.job.attempt": int64(1), "jobgate.job.outcome": "released"}),
			events: []wantEvent{
				{"touch", nil},
				{"release", map[string]any{"jobgate.job.priority": int64(1024), "jobgate.job.delay_ms": int64(2000)}},
			},
		},
		receive(2),
		{
			name: "process emails", kind: trace.SpanKindConsumer, parent: "send emails",
			attrs: with(map[string]any{"messaging.operation.name": "reserve", "messaging.operation.type": "process",
				"jobgate.job.attempt": int64(2), "jobgate.job.outcome": "completed"}),
			events: []wantEvent{{"retry", map[string]any{"jobgate.job.attempt": int64(2)}}},
		},
	})
}

// TestFailures covers each way a job or submit can fail: the error.type,
// the status and the outcome.
func TestFailures(t *testing.T) {
	ctx := context.Background()
	procAttrs := func(sys, op, outcome, errType string) map[string]any {
		return map[string]any{
			"messaging.system": sys, "messaging.operation.name": op,
			"messaging.operation.type": "process", "messaging.destination.name": "q",
			"jobgate.job.outcome": outcome, "error.type": errType,
		}
	}
	cases := []struct {
		name string
		sys  System
		op   string
		end  func(Process)
		want wantSpan
	}{
		{
			name: "WORK_EXCEPTION", sys: Gearman, op: "JOB_ASSIGN",
			end: func(p Process) { p.Fail("WORK_EXCEPTION") },
			want: wantSpan{attrs: procAttrs("gearman", "JOB_ASSIGN", "failed", "WORK_EXCEPTION"),
				status: codes.Error, statusDesc: "WORK_EXCEPTION"},
		},
		{
			name: "WORK_FAIL", sys: Gearman, op: "JOB_ASSIGN",
			end: func(p Process) { p.Fail("WORK_FAIL") },
			want: wantSpan{attrs: procAttrs("gearman", "JOB_ASSIGN", "failed", "WORK_FAIL"),
				status: codes.Error, statusDesc: "WORK_FAIL"},
		},
		{
			name: "worker lost", sys: Gearman, op: "JOB_ASSIGN",
			end: func(p Process) { p.Fail(ErrorWorkerLost) },
			want: wantSpan{attrs: procAttrs("gearman", "JOB_ASSIGN", "failed", "worker_lost"),
				status: codes.Error, statusDesc: "worker_lost"},
		},
		{
			name: "empty reason", sys: Gearman, op: "JOB_ASSIGN",
			end: func(p Process) { p.Fail("") },
			want: wantSpan{attrs: procAttrs("gearman", "JOB_ASSIGN", "failed", "_OTHER"),
				status: codes.Error, statusDesc: "_OTHER"},
		},
		{
			name: "bury", sys: Beanstalk, op: "reserve",
			end: func(p Process) { p.Bury(5) },
			want: wantSpan{attrs: procAttrs("beanstalk", "reserve", "buried", "bury"),
				events: []wantEvent{{"bury", map[string]any{"jobgate.job.priority": int64(5)}}},
				status: codes.Error, statusDesc: "bury"},
		},
		{
			name: "TTR expiry", sys: Beanstalk, op: "reserve",
			end: func(p Process) { p.TTRExpired() },
			want: wantSpan{attrs: procAttrs("beanstalk", "reserve", "ttr_expired", "ttr_expired"),
				events: []wantEvent{{"ttr_expired", nil}},
				status: codes.Error, statusDesc: "ttr_expired"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, rec := recorded(t, tc.sys, Config{})
			s := tr.StartSend(ctx, Message{Operation: "submit", Destination: "q"})
			s.End()
			_, p := tr.StartProcess(ctx, s.Creation(), Message{Operation: tc.op, Destination: "q"})
			tc.end(p)
			tc.end(p) // a second end is harmless: the SDK ignores it
			w := tc.want
			w.name, w.kind, w.parent = "process q", trace.SpanKindConsumer, "send q"
			send := wantSpan{name: "send q", kind: trace.SpanKindProducer, attrs: map[string]any{
				"messaging.system": string(tc.sys), "messaging.operation.name": "submit",
				"messaging.operation.type": "send", "messaging.destination.name": "q",
				"messaging.message.body.size": int64(0),
			}}
			checkSpans(t, rec.Ended(), []wantSpan{send, w})
		})
	}

	t.Run("refused submit", func(t *testing.T) {
		tr, rec := recorded(t, Beanstalk, Config{})
		s := tr.StartSend(ctx, Message{Operation: "put", Destination: "big", BodySize: 70000})
		s.Fail("JOB_TOO_BIG")
		checkSpans(t, rec.Ended(), []wantSpan{{
			name: "send big", kind: trace.SpanKindProducer,
			attrs: map[string]any{
				"messaging.system": "beanstalk", "messaging.operation.name": "put",
				"messaging.operation.type": "send", "messaging.destination.name": "big",
				"messaging.message.body.size": int64(70000), "error.type": "JOB_TOO_BIG",
			},
			status: codes.Error, statusDesc: "JOB_TOO_BIG",
		}})
	})
}

// TestUntracedJob: a job with no creation context (from before tracing was
// on) still gets receive and process spans, as roots of a new trace with no
// links, and a span in ctx parents them instead.
func TestUntracedJob(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	m := Message{Operation: "JOB_ASSIGN", Destination: "f", BodySize: 1}
	tr.Receive(context.Background(), Creation{}, m)
	_, p := tr.StartProcess(context.Background(), Creation{}, m)
	p.Complete()
	got := rec.Ended()
	if len(got) != 2 || got[0].Parent().IsValid() || got[1].Parent().IsValid() || len(got[0].Links()) != 0 {
		t.Fatalf("want two root spans without links, got %d spans", len(got))
	}
}

// TestNilTracer: tracing off means a nil *Tracer, and every helper must be
// a silent no-op on it and on zero span values.
func TestNilTracer(t *testing.T) {
	var tr *Tracer
	ctx := context.Background()
	s := tr.StartSend(ctx, Message{Destination: "x"})
	if s.Creation() != (Creation{}) || s.Span().IsRecording() {
		t.Fatal("nil tracer: send should be a no-op")
	}
	s.Created("1")
	s.Fail("x")
	s.End()
	tr.Receive(ctx, Creation{}, Message{})
	pctx, p := tr.StartProcess(ctx, Creation{}, Message{})
	if pctx != ctx || p.IsOpen() || p.SpanContext().IsValid() || p.Span().IsRecording() {
		t.Fatal("nil tracer: process should be a no-op")
	}
	p.Status("1", "2")
	p.Data(1)
	p.Warning(1)
	p.Touch()
	p.Release(1, time.Second)
	p.Bury(1)
	p.TTRExpired()
	p.Fail("x")
	p.Complete()
	if tr.CommandSpans() || tr.PayloadTraceparent() {
		t.Fatal("nil tracer: switches should be off")
	}
	cctx, c := tr.StartCommand(ctx, Message{Operation: "stats"})
	c.End("")
	if cctx != ctx {
		t.Fatal("nil tracer: StartCommand changed the context")
	}
	if b, ok := tr.WrapPayload(nil, trace.SpanContext{}, []byte("x")); ok || string(b) != "x" {
		t.Fatal("nil tracer: WrapPayload changed the body")
	}
}

// TestCommandSpans: admin commands make spans only when switched on.
func TestCommandSpans(t *testing.T) {
	ctx := context.Background()
	m := Message{Operation: "stats-tube", Destination: "emails"}

	off, rec := recorded(t, Beanstalk, Config{})
	if off.CommandSpans() {
		t.Fatal("CommandSpans on by default")
	}
	_, c := off.StartCommand(ctx, m)
	c.End("")
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("switched off: %d spans", n)
	}

	on, rec := recorded(t, Beanstalk, Config{CommandSpans: true})
	_, c = on.StartCommand(ctx, m)
	c.End("")
	_, c = on.StartCommand(ctx, Message{Operation: "stats-job"})
	c.End("NOT_FOUND")
	got := rec.Ended()
	if len(got) != 2 {
		t.Fatalf("switched on: %d spans, want 2", len(got))
	}
	checkSpans(t, got[:1], []wantSpan{{
		name: "stats-tube", kind: trace.SpanKindServer,
		attrs: map[string]any{"messaging.system": "beanstalk", "messaging.operation.name": "stats-tube",
			"messaging.destination.name": "emails"},
	}})
	checkSpans(t, got[1:], []wantSpan{{
		name: "stats-job", kind: trace.SpanKindServer,
		attrs: map[string]any{"messaging.system": "beanstalk", "messaging.operation.name": "stats-job",
			"error.type": "NOT_FOUND"},
		status: codes.Error, statusDesc: "NOT_FOUND",
	}})
}

// TestUnsampledJob: when the producer's span is not sampled, the job's
// later spans are not recorded either (parent-based sampling), and its
// creation context says so.
func TestUnsampledJob(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	tr := NewTracer(tp, Gearman, Config{})
	s := tr.StartSend(context.Background(), Message{Destination: "f"})
	c := s.Creation()
	s.End()
	if !c.IsValid() || c.IsSampled() {
		t.Fatalf("creation %v: want valid and not sampled", c)
	}
	_, p := tr.StartProcess(context.Background(), c, Message{Destination: "f"})
	p.Complete()
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans recorded, want none", n)
	}
}
