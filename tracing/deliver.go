package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// Deliver records the handing of a job to a worker (JOB_ASSIGN*,
// RESERVED) in one call: the receive span, as [Tracer.Receive], and the
// start of the process span, returned, as [Tracer.StartProcess] with a
// background context. It is what the proxy calls at every traced
// assignment, so it does that work once: one clock reading serves as the
// receive's end and the process's start (they are the same moment), the
// parent is found once, and no context is built for the process span,
// which the proxy would discard (StartProcess's costs an allocation).
func (t *Tracer) Deliver(c Creation, m Message) Process {
	if t == nil {
		return Process{}
	}
	if t.lean == nil {
		ctx := context.Background()
		t.Receive(ctx, c, m)
		_, p := t.StartProcess(ctx, c, m)
		return p
	}
	parent := spanParent(context.Background(), c)
	now := leanTime() // one reading, the monotonic clock only (lean_clock.go)
	t.lean.receiveAt(parent, c.IsValid(), &m, now)
	s, sc := t.lean.processAt(parent, &m, now)
	return leanProcess(s, sc)
}

// ProcessOnly starts the process span of a job as [Tracer.StartProcess]
// with a background context, without building the context: for the
// proxy, which keeps only the Process.
func (t *Tracer) ProcessOnly(c Creation, m Message) Process {
	if t == nil {
		return Process{}
	}
	if t.lean == nil {
		_, p := t.StartProcess(context.Background(), c, m)
		return p
	}
	s, sc := t.lean.process(context.Background(), c, &m)
	return leanProcess(s, sc)
}

// leanProcess is the Process handle of a process span the lean path
// started (record s, nil when not recorded, with context sc), as
// StartProcess makes it.
func leanProcess(s *leanSpan, sc trace.SpanContext) Process {
	p := Process{span: leanHandleSpan(s, sc, true), cr: CreationOf(sc), ts: traceStateOf(sc)}
	if s != nil {
		p.gen = s.gen
	}
	return p
}
