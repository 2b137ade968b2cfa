package proxy

import (
	"bytes"
	"context"
	"sync"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/tracing"
)

// gearmanTrace makes the spans of the jobs of a GearmanServer's local
// engine (tracing/doc.go says which call goes with which event). The
// engine keeps each traced job's creation context; this keeps the open
// process span of each running traced job, keyed by job id, because its
// end may come from the worker's WORK_* packets or from inside the engine
// (worker gone, CAN_DO_TIMEOUT, CANT_DO) through the engine's TraceHook.
//
// With tracing off the server has no gearmanTrace (nil), and a connection
// hands its packets to the engine exactly as before.
//
// Lock order: the engine's lock, then mu (the hook runs under the engine
// lock). Nothing calls into the engine while holding mu.
type gearmanTrace struct {
	tr  *tracing.Tracer
	eng *gearman.Engine
	mu  sync.Mutex
	// open is the process span of every running traced job.
	open openSpans
	// early holds process spans started at assignment, inside the engine,
	// to put their context in the payload envelope (JobAssigning), until
	// the grab's handling picks them up (assigned). Guarded by mu.
	early map[uint64]tracing.Process
	// returned holds traced jobs the engine took back from their worker
	// before the grab that assigned them had put their process span: a
	// CAN_DO_TIMEOUT that fires between the engine's assignment and
	// assigned, which then ends the span at once. Guarded by mu.
	returned map[uint64]gearman.ReturnReason
	wrap     []byte // the last envelope; guarded by the engine's lock
	// handlePrefix is what precedes the job number in the engine's
	// handles: the spans carry the number and the exporter formats the
	// handle, so the loop builds no string for it.
	handlePrefix string
	// functions keeps the function names of recent submits, so a traced
	// submit does not copy its function's name each time.
	functions tracing.Names
}

var (
	_ gearman.TraceHook  = (*gearmanTrace)(nil)
	_ gearman.AssignHook = (*gearmanTrace)(nil)
	_ gearman.TraceClock = (*gearmanTrace)(nil)
	_ gearman.TraceClock = gearmanReturns{}
)

// TraceNow is the spans' clock (Tracer.Now), for the ready times the
// engine keeps: a job's queue wait is then read on the clock of its spans.
func (gt *gearmanTrace) TraceNow() int64 { return gt.tr.Now().UnixNano() }

// gearmanReturns is the engine hook when the payload envelope is off: it
// is not an AssignHook, so the engine does not call out at assignment.
type gearmanReturns struct{ gt *gearmanTrace }

// JobReturned is gearmanTrace.JobReturned.
func (r gearmanReturns) JobReturned(id uint64, why gearman.ReturnReason) { r.gt.JobReturned(id, why) }

// TraceNow is gearmanTrace.TraceNow.
func (r gearmanReturns) TraceNow() int64 { return r.gt.TraceNow() }

// JobAssigning starts the process span of traced job id as the engine
// assigns it, and returns its workload inside a traceparent envelope. It
// runs under the engine lock, only with payload_traceparent on.
func (gt *gearmanTrace) JobAssigning(id uint64, jt gearman.JobTrace, data []byte) []byte {
	cr := tracing.Creation(jt.Creation)
	p := gt.tr.ProcessOnly(cr, gt.message(id, "", jt, time.Time{}))
	gt.mu.Lock()
	gt.early[id] = p
	gt.mu.Unlock()
	if w, ok := gt.tr.WrapPayload(gt.wrap[:0], p.SpanContext(), data); ok {
		gt.wrap = w
		return w
	}
	return data
}

// wireTracing makes s trace its local engine's jobs with tr; a nil tr
// leaves tracing off.
func (s *GearmanServer) wireTracing(tr *tracing.Tracer) {
	if tr == nil {
		return
	}
	gt := &gearmanTrace{tr: tr, eng: s.engine}
	h := string(s.engine.AppendHandle(nil, 0))
	gt.handlePrefix = h[:len(h)-1] // a handle is the prefix and the job number in decimal
	s.trace = gt
	if tr.PayloadTraceparent() {
		gt.early = make(map[uint64]tracing.Process)
		s.engine.SetTraceHook(gt)
	} else {
		s.engine.SetTraceHook(gearmanReturns{gt})
	}
}

// isSubmit reports whether t creates a job.
func isSubmit(t codec.Type) bool {
	switch t {
	case codec.SubmitJob, codec.SubmitJobBg, codec.SubmitJobHigh, codec.SubmitJobHighBg,
		codec.SubmitJobLow, codec.SubmitJobLowBg, codec.SubmitJobSched, codec.SubmitJobEpoch,
		codec.SubmitReduceJob, codec.SubmitReduceJobBackground:
		return true
	}
	return false
}

// handleTraced is handlePacket for the local engine with tracing on: the
// spans around the engine's handling of p.
func (c *gearmanConn) handleTraced(p *codec.Packet) error {
	gt, sess := c.srv.trace, c.engine
	var send tracing.Send
	var start time.Time
	recording := false // send is recorded; only this goroutine ends it
	switch t := p.Type; {
	case isSubmit(t) && len(p.Args) >= 3:
		start = gt.tr.Now()
		// Unsampled jobs copy no strings and cost the engine no memory:
		// their spans would not be recorded anyway (parent-based).
		send = gt.tr.StartSendBare(context.Background(), start)
		if recording = send.Recording(); recording {
			send.Describe(tracing.Message{
				Operation: t.String(), Destination: gt.functions.String(p.Args[0]), ConversationID: string(p.Args[1]),
				BodySize: len(p.Data()),
			})
			sess.SetCreationAt(gearman.Creation(send.Creation()), start.UnixNano())
		}
	case t == codec.GrabJob || t == codec.GrabJobUniq || t == codec.GrabJobAll:
		start = gt.tr.Now()
	}
	err := sess.Handle(p)
	if err != nil {
		send.Fail("INVALID_ARGUMENT")
		return err
	}
	switch t := p.Type; {
	case isSubmit(t) && recording:
		if id := sess.LastJob(); id != 0 {
			send.CreatedNum(gt.handlePrefix, id)
		} else if code := sess.LastError(); code != "" {
			send.Fail(code)
		} else {
			send.End()
		}
	case t == codec.GrabJob || t == codec.GrabJobUniq || t == codec.GrabJobAll:
		if jt, ok := sess.LastJobTrace(); ok {
			gt.assigned(sess.LastJob(), jt, t, start)
		}
	case t == codec.WorkStatus || t == codec.WorkData || t == codec.WorkWarning ||
		t == codec.WorkComplete || t == codec.WorkFail || t == codec.WorkException:
		if sess.Outcome() == gearman.OutcomeOK && len(p.Args) > 0 {
			gt.work(p)
		}
	}
	return nil
}

// assigned starts the receive and process spans of traced job id (jt,
// as the engine gave it with the grab: no second look-up under its
// lock), just handed to a worker by a grab of type t sent at start.
func (gt *gearmanTrace) assigned(id uint64, jt gearman.JobTrace, t codec.Type, start time.Time) {
	cr := tracing.Creation(jt.Creation)
	op := "JOB_ASSIGN"
	switch t {
	case codec.GrabJobUniq:
		op = "JOB_ASSIGN_UNIQ"
	case codec.GrabJobAll:
		op = "JOB_ASSIGN_ALL"
	}
	m := gt.message(id, op, jt, start)
	var p tracing.Process
	early := false
	if gt.early != nil { // payload envelope on
		gt.mu.Lock()
		p, early = gt.early[id]
		delete(gt.early, id)
		gt.mu.Unlock()
	}
	if early {
		// Started inside the engine for the envelope; name its operation now.
		gt.tr.Receive(context.Background(), cr, m)
		p.SetOperationName(op)
	} else {
		p = gt.tr.Deliver(cr, m)
	}
	gt.mu.Lock()
	why, gone := gt.returned[id] // a nil map reads as empty
	var old tracing.Process
	if gone {
		delete(gt.returned, id)
	} else {
		old = gt.open.put(id, p)
	}
	gt.mu.Unlock()
	if gone {
		p.Fail(why.String())
	}
	// A span still open here lost its end in a race with the engine.
	old.Fail(tracing.ErrorWorkerLost)
}

// message describes traced job id for its receive and process spans.
func (gt *gearmanTrace) message(id uint64, op string, jt gearman.JobTrace, start time.Time) tracing.Message {
	return tracing.Message{
		Operation: op, Destination: jt.Function, IDPrefix: gt.handlePrefix, IDNum: id,
		ConversationID: jt.Unique, BodySize: jt.BodySize, Enqueued: jt.Ready,
		Attempt: jt.Attempt, Start: start,
	}
}

// work records a WORK_* packet the engine accepted from the job's worker.
func (gt *gearmanTrace) work(p *codec.Packet) {
	id, ok := gt.eng.JobID(p.Args[0])
	if !ok {
		return
	}
	switch p.Type {
	case codec.WorkStatus, codec.WorkData, codec.WorkWarning:
		gt.mu.Lock()
		proc := gt.open.get(id)
		gt.mu.Unlock()
		switch {
		case p.Type == codec.WorkStatus && len(p.Args) >= 3:
			proc.Status(string(p.Args[1]), string(p.Args[2]))
		case p.Type == codec.WorkData && len(p.Args) >= 2:
			proc.Data(len(p.Args[1]))
		case p.Type == codec.WorkWarning && len(p.Args) >= 2:
			proc.Warning(len(p.Args[1]))
		}
	case codec.WorkComplete:
		gt.take(id).Complete()
	case codec.WorkFail, codec.WorkException:
		gt.take(id).Fail(p.Type.String())
	}
}

// take removes and returns job id's open process span; the zero Process,
// which ignores every call, when there is none.
func (gt *gearmanTrace) take(id uint64) tracing.Process {
	gt.mu.Lock()
	p := gt.open.take(id)
	gt.mu.Unlock()
	return p
}

// JobReturned ends the process span of a job taken back from its worker
// (error.type worker_lost, timeout or cant_do). It runs under the engine
// lock; ending a span only queues it (the export queue never blocks).
func (gt *gearmanTrace) JobReturned(id uint64, why gearman.ReturnReason) {
	gt.mu.Lock()
	p := gt.open.take(id)
	if !p.IsOpen() {
		// Its grab has not put the span yet (see returned). The grab's
		// goroutine does so right after the engine returns, so an entry
		// lives microseconds; the cap only bounds a path that never does.
		if gt.returned == nil || len(gt.returned) >= maxEarlyReturns {
			gt.returned = make(map[uint64]gearman.ReturnReason)
		}
		gt.returned[id] = why
	}
	gt.mu.Unlock()
	p.Fail(why.String())
}

// maxEarlyReturns bounds gearmanTrace.returned.
const maxEarlyReturns = 64

// handleTextTraced hands an admin text line to the session, in a SERVER span
// named after its command when command_spans is on (the server's Tracer,
// gateway or not). The span ends when the line is handled; a gateway's
// merged answers may still be on their way.
func (c *gearmanConn) handleTextTraced(line []byte) error {
	tr := c.srv.cfg.Tracer
	if !tr.CommandSpans() {
		return c.sess.HandleText(line)
	}
	word, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
	_, cmd := tr.StartCommand(context.Background(), tracing.Message{Operation: string(word)})
	err := c.sess.HandleText(line)
	if err != nil {
		cmd.End("error")
	} else {
		cmd.End("")
	}
	return err
}
