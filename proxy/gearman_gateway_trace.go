package proxy

import (
	"context"
	"net"
	"strconv"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/tracing"
)

// gwTrace makes the spans of jobs that pass through a Gearman gateway
// (tracing/doc.go says which call goes with which event). Upstream servers
// store nothing of ours, so a job's creation context, delivery count and
// open process span live in a Table keyed by the client-visible handle,
// which is also what the worker's WORK_* packets name. Jobs of the local
// backend go through the same table when served by a gateway.
//
// Lock order: gwSession.mu, then the Table's lock. Spans are started and
// ended with gwSession.mu held where the reply is being filled in; that is
// span bookkeeping only (the export queue never blocks).
type gwTrace struct {
	tr    *tracing.Tracer
	table *tracing.Table[string]
	clk   clock.Clock // runs the CAN_DO_TIMEOUT deadlines (trace_deadline.go)
}

// gwAddr is a backend's host and port for span attributes.
type gwAddr struct {
	host string
	port int
}

// gwJobTrace is a reply's tracing state: the send span of a SUBMIT_*, or
// when a GRAB_JOB* was sent.
type gwJobTrace struct {
	send   tracing.Send
	cr     tracing.Creation
	start  time.Time
	unique string // the submit's unique id
}

// newGwTrace returns the gateway's tracing state, or nil with tracing off.
func newGwTrace(tr *tracing.Tracer, size int, clk clock.Clock) *gwTrace {
	if tr == nil {
		return nil
	}
	return &gwTrace{tr: tr, table: tracing.NewTable[string](traceTableSize(size)), clk: clk}
}

// traceTableSize is a gateway's trace table size: size, or the default
// when it is not set.
func traceTableSize(size int) int {
	if size <= 0 {
		return tracing.DefaultTableSize
	}
	return size
}

// addrOf is an upstream backend's host and port for span attributes, zero
// for the local engine; either gateway's. Found per span, not cached,
// since a reload may bring new backends.
func addrOf(b *routing.Backend) gwAddr {
	var up any = b.Gearman
	if b.Beanstalk != nil {
		up = b.Beanstalk
	}
	a, ok := up.(interface{ Addr() string })
	if !ok {
		return gwAddr{}
	}
	host, port, err := net.SplitHostPort(a.Addr())
	if err != nil {
		return gwAddr{}
	}
	p, _ := strconv.Atoi(port)
	return gwAddr{host, p}
}

// TraceEvicted returns how many jobs a traced gateway dropped from its
// table of traced jobs because it was full (tracing.table_size); 0 for a
// server that is not a traced gateway. It only grows.
func (s *GearmanServer) TraceEvicted() uint64 {
	if s.gw == nil || s.gw.trace == nil {
		return 0
	}
	return s.gw.trace.table.Evicted()
}

// submit starts the send span of SUBMIT_* p, received at start and about
// to go to backend b, and keeps it on r until the reply.
func (t *gwTrace) submit(r *gwReply, p *codec.Packet, b *routing.Backend, start time.Time) {
	send := t.tr.StartSendBare(context.Background(), start)
	if !send.Recording() {
		send.End() // unsampled: nothing to keep for this job
		return
	}
	a := addrOf(b)
	send.Describe(tracing.Message{
		Operation: p.Type.String(), Destination: string(p.Function()), ConversationID: string(p.Arg(1)),
		BodySize: len(p.Data()), ServerAddress: a.host, ServerPort: a.port,
	})
	r.trace = &gwJobTrace{start: start, send: send, cr: send.Creation(), unique: string(p.Arg(1))}
}

// refused records a SUBMIT_* no backend took.
func (t *gwTrace) refused(p *codec.Packet, start time.Time) {
	t.tr.StartSend(context.Background(), tracing.Message{
		Operation: p.Type.String(), Destination: string(p.Function()), ConversationID: string(p.Arg(1)),
		BodySize: len(p.Data()), Start: start,
	}).Fail("backend_unavailable")
}

// replyLocked sees backend b's reply p to request r, whose client-visible
// form r.out was just encoded: the end of a submit's send span, or the
// start of an assigned job's receive and process spans. s.mu is held.
func (t *gwTrace) replyLocked(s *gwSession, r *gwReply, b *routing.Backend, p *codec.Packet) {
	if r.trace == nil {
		return
	}
	switch p.Type {
	case codec.JobCreated:
		h := t.clientHandle(s, b, p)
		r.trace.send.Created(h)
		if h != "" && r.trace.cr.IsSampled() {
			// With the unique id, Put knows a coalesced submit: the job
			// stays in the trace of the submit that created it.
			t.table.Put(h, tracing.Entry{Creation: r.trace.cr, Enqueued: t.tr.Now(), Unique: r.trace.unique})
		}
	case codec.Error:
		r.trace.send.Fail(string(p.Arg(0)))
	case codec.JobAssign, codec.JobAssignUniq, codec.JobAssignAll:
		t.assignedLocked(s, r, b, p)
	}
}

// clientHandle returns the handle of p as the client sees it.
func (t *gwTrace) clientHandle(s *gwSession, b *routing.Backend, p *codec.Packet) string {
	var hb [routing.MaxHandleLen + 1]byte
	h, err := s.gw.rt().cfg.Handles.Append(hb[:0], b, p.Arg(0))
	if err != nil {
		return ""
	}
	return string(h)
}

// assignedLocked starts the receive and process spans of a job assigned
// to the worker, if the gateway saw its submit.
func (t *gwTrace) assignedLocked(s *gwSession, r *gwReply, b *routing.Backend, p *codec.Packet) {
	h := t.clientHandle(s, b, p)
	e, ok := t.table.Get(h)
	if !ok {
		return // submitted elsewhere, before tracing, unsampled or evicted
	}
	a := addrOf(b)
	m := tracing.Message{
		Operation: p.Type.String(), Destination: string(p.Arg(1)), ID: h,
		BodySize: len(p.Data()), Enqueued: e.Enqueued, Attempt: e.Attempts + 1,
		ServerAddress: a.host, ServerPort: a.port, Start: r.trace.start,
	}
	if p.Type != codec.JobAssign {
		m.ConversationID = string(p.Arg(2))
	}
	proc := t.tr.Deliver(e.Creation, m)
	// The upstream takes the job back after the worker's CAN_DO_TIMEOUT.
	var timeout time.Duration
	if a := s.abilities[string(p.Arg(1))]; a != nil {
		timeout = canDoTimeout(a.timeout)
	}
	var old tracing.Process
	t.table.Update(h, func(e *tracing.Entry) {
		old = e.Process
		e.StopDeadline()
		e.Attempts++
		e.Process = proc
		if timeout > 0 {
			e.Deadline = t.clk.AfterFunc(timeout, func() { t.timedOut(s, h, proc) })
		}
	})
	// A span still open lost its end: the job came back to the server
	// without a WORK_* through us (an upstream session failed).
	old.Fail(tracing.ErrorWorkerLost)
	if s.traced == nil {
		s.traced = map[string]struct{}{}
	}
	s.traced[h] = struct{}{}
	// The payload envelope goes on the copy delivered to the worker only.
	if wrapped, ok := t.tr.WrapPayload(nil, proc.SpanContext(), p.Data()); ok && len(p.Args) > 0 {
		cp := *p
		cp.Args = append([][]byte(nil), p.Args...)
		cp.Args[len(cp.Args)-1] = wrapped
		r.out = s.encodeLocked(r.out[:0], b, &cp)
	}
}

// work records a WORK_* the worker sends for client-visible handle h.
func (t *gwTrace) work(s *gwSession, p *codec.Packet) {
	h := string(p.Arg(0))
	switch p.Type {
	case codec.WorkStatus, codec.WorkData, codec.WorkWarning:
		e, ok := t.table.Get(h)
		if !ok {
			return
		}
		switch p.Type {
		case codec.WorkStatus:
			e.Process.Status(string(p.Arg(1)), string(p.Arg(2)))
		case codec.WorkData:
			e.Process.Data(len(p.Data()))
		default:
			e.Process.Warning(len(p.Data()))
		}
		return
	}
	// Only the worker holding the job ends it: upstream answers anyone
	// else (a worker whose CAN_DO_TIMEOUT ran out, one that never had
	// it) JOB_NOT_FOUND, and the job goes on.
	s.mu.Lock()
	_, held := s.traced[h]
	delete(s.traced, h)
	s.mu.Unlock()
	if !held {
		return
	}
	e, ok := t.table.Delete(h)
	if !ok {
		return
	}
	e.StopDeadline()
	if p.Type == codec.WorkComplete {
		e.Process.Complete()
	} else {
		e.Process.Fail(p.Type.String())
	}
}

// closed ends the process spans of the jobs the closing worker holds: the
// servers give them to another worker, a new receive/process pair.
func (t *gwTrace) closed(s *gwSession) {
	s.mu.Lock()
	held := s.traced
	s.traced = nil
	s.mu.Unlock()
	for h := range held {
		var p tracing.Process
		t.table.Update(h, func(e *tracing.Entry) {
			p = e.Process
			e.Process = tracing.Process{}
			e.StopDeadline()
			e.Enqueued = t.tr.Now()
		})
		p.Fail(tracing.ErrorWorkerLost)
	}
}

// timedOut ends process span proc of job h, held by s's worker, when the
// worker's CAN_DO_TIMEOUT has run out: the upstream has requeued the job,
// so the worker no longer holds it. error.type "timeout", as the local
// engine says.
func (t *gwTrace) timedOut(s *gwSession, h string, proc tracing.Process) {
	s.mu.Lock()
	p := expireProcess(t.table, h, proc)
	if p.IsOpen() {
		delete(s.traced, h)
	}
	s.mu.Unlock()
	p.Fail(gearman.ReturnTimeout.String())
}
