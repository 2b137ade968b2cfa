package proxy

import (
	"context"
	"strconv"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/tracing"
)

// bgwTrace makes the spans of jobs that pass through a Beanstalk gateway
// (tracing/doc.go says which call goes with which event), as gwTrace does
// for Gearman. Upstream servers store nothing of ours, so a job's creation
// context, tube, delivery count and open process span live in a Table
// keyed by the client-visible id, which is what the worker's delete,
// release, bury and touch name. Jobs of the local backend go through the
// same table when served by the gateway.
//
// Every hook runs on the connection's read loop as the reply is written
// (writeSlot), so spans follow the order the client sees. A job whose TTR
// runs out on an upstream is not seen on the wire: a timer on clk, armed
// at the reservation with the TTR of the put (trace_deadline.go), ends
// its process span then.
type bgwTrace struct {
	tr    *tracing.Tracer
	table *tracing.Table[uint64]
	clk   clock.Clock
}

// bgwSpan is a slot's tracing state: the send span of a put.
type bgwSpan struct {
	send tracing.Send
	cr   tracing.Creation
	tube string
	ttr  time.Duration // as the upstream applies it
}

// newBgwTrace returns the gateway's tracing state, or nil with tracing off.
func newBgwTrace(tr *tracing.Tracer, size int, clk clock.Clock) *bgwTrace {
	if tr == nil {
		return nil
	}
	return &bgwTrace{tr: tr, table: tracing.NewTable[uint64](traceTableSize(size)), clk: clk}
}

// TraceEvicted returns how many jobs a traced Beanstalk gateway
// dropped from its table of traced jobs because it was full; 0 for a
// server that is not a traced gateway. It only grows.
func (s *BeanstalkServer) TraceEvicted() uint64 {
	if s.gw == nil || s.gw.trace == nil {
		return 0
	}
	return s.gw.trace.table.Evicted()
}

// put starts the send span of put cmd into tube, about to go to b, and
// keeps it on sl until the reply.
func (t *bgwTrace) put(sl *bgwSlot, tube []byte, cmd *wire.Command, b *routing.Backend) {
	body := len(cmd.Body)
	send := t.tr.StartSendBare(context.Background(), t.tr.Now())
	if !send.Recording() {
		send.End() // unsampled: nothing to keep for this job
		return
	}
	a := addrOf(b)
	name := string(tube)
	send.Describe(tracing.Message{Operation: "put", Destination: name, BodySize: body,
		ServerAddress: a.host, ServerPort: a.port})
	sl.span = &bgwSpan{send: send, cr: send.Creation(), tube: name, ttr: beanstalkTTR(cmd.TTR)}
}

// refused records a put the gateway answered itself: the codec refused it,
// the server is draining, or no backend took it.
func (t *bgwTrace) refused(tube []byte, body int, errType string) {
	t.tr.StartSend(context.Background(), tracing.Message{
		Operation: "put", Destination: string(tube), BodySize: body,
	}).Fail(errType)
}

// reply sees the reply in sl about to be written to the client: r.ID is
// the client's id already. kind is the reply the client gets when it is
// not sl.reply (INTERNAL_ERROR); 0 otherwise.
func (t *bgwTrace) reply(s *bgwSession, sl *bgwSlot, kind wire.ReplyKind) {
	r := &sl.reply
	if kind == 0 {
		kind = r.Kind
	}
	if sp := sl.span; sp != nil {
		sl.span = nil
		if kind == wire.Inserted {
			sp.send.Created(strconv.FormatUint(r.ID, 10))
			if sp.cr.IsSampled() {
				t.table.Put(r.ID, tracing.Entry{Creation: sp.cr, Enqueued: t.tr.Now(), Name: sp.tube, Timeout: sp.ttr})
			}
		} else {
			sp.send.Fail(kind.String())
		}
		return
	}
	if sl.be == nil || kind != r.Kind {
		return
	}
	switch sl.verb {
	case wire.Reserve, wire.ReserveWithTimeout, wire.ReserveJob:
		if r.Kind == wire.Reserved {
			t.reserved(s, sl)
		}
	case wire.Delete:
		if r.Kind == wire.Deleted {
			if e, ok := t.table.Delete(sl.id); ok {
				e.StopDeadline()
				e.Process.Complete()
			}
		}
	case wire.Release:
		switch r.Kind {
		case wire.Released:
			delay := time.Duration(sl.delay) * time.Second
			t.requeue(sl.id, delay, func(p tracing.Process) { p.Release(sl.pri, delay) })
		case wire.Buried: // released into a server out of memory: buried instead
			t.requeue(sl.id, 0, func(p tracing.Process) { p.Bury(sl.pri) })
		}
	case wire.Bury:
		if r.Kind == wire.Buried {
			t.requeue(sl.id, 0, func(p tracing.Process) { p.Bury(sl.pri) })
		}
	case wire.Touch:
		if r.Kind == wire.Touched {
			t.touched(sl.id)
		}
	}
}

// reserved starts the receive and process spans of a job handed to the
// client, if the gateway saw its put, and wraps the payload if configured.
func (t *bgwTrace) reserved(s *bgwSession, sl *bgwSlot) {
	r := &sl.reply
	e, ok := t.table.Get(r.ID)
	if !ok {
		return // put elsewhere, before tracing, unsampled or evicted
	}
	a := addrOf(sl.be.b)
	m := tracing.Message{
		Operation: sl.verb.String(), Destination: e.Name, ID: strconv.FormatUint(r.ID, 10),
		BodySize: len(r.Body), Enqueued: e.Enqueued, Attempt: e.Attempts + 1,
		ServerAddress: a.host, ServerPort: a.port, Start: sl.start,
	}
	proc := t.tr.Deliver(e.Creation, m)
	var old tracing.Process
	id := r.ID
	t.table.Update(id, func(e *tracing.Entry) {
		old = e.Process
		e.StopDeadline()
		e.Attempts++
		e.Process = proc
		t.armTTR(e, id)
	})
	// A span still open lost its end: the job came back to its server
	// without an outcome through us (TTR, a failed session).
	old.Fail(tracing.ErrorWorkerLost)
	if body, wrapped := t.tr.WrapPayload(s.wrap[:0], proc.SpanContext(), r.Body); wrapped {
		s.wrap = body
		r.Body = body
	}
}

// requeue ends job id's process span with end and marks it ready again
// after delay (buried jobs wait for a kick; their next reserve counts from
// here too).
func (t *bgwTrace) requeue(id uint64, delay time.Duration, end func(tracing.Process)) {
	var p tracing.Process
	t.table.Update(id, func(e *tracing.Entry) {
		p = e.Process
		e.Process = tracing.Process{}
		e.StopDeadline()
		e.Enqueued = t.tr.Now().Add(delay)
	})
	if p.IsOpen() {
		end(p)
	}
}

// lost ends the process span of job id, which went back to ready because
// the client's session to its backend ended.
func (t *bgwTrace) lost(id uint64) {
	var p tracing.Process
	t.table.Update(id, func(e *tracing.Entry) {
		p = e.Process
		e.Process = tracing.Process{}
		e.StopDeadline()
		e.Enqueued = t.tr.Now()
	})
	p.Fail(tracing.ErrorWorkerLost)
}

// armTTR arms the end of entry e's open process span (job id) at the
// job's TTR from now, as the upstream's reservation runs. The table's
// lock is held.
func (t *bgwTrace) armTTR(e *tracing.Entry, id uint64) {
	if e.Timeout <= 0 || !e.Process.IsOpen() {
		return
	}
	proc := e.Process
	e.Deadline = t.clk.AfterFunc(e.Timeout, func() {
		expireProcess(t.table, id, proc).TTRExpired()
	})
}

// touched records a touch of job id: an event on its process span, and
// the TTR counted again from now, as the upstream does.
func (t *bgwTrace) touched(id uint64) {
	var p tracing.Process
	t.table.Update(id, func(e *tracing.Entry) {
		p = e.Process
		if e.Deadline != nil {
			e.StopDeadline()
			t.armTTR(e, id)
		}
	})
	p.Touch()
}
