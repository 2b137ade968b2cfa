package proxy

import (
	"context"
	"sync"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/tracing"
)

// beanstalkTrace makes the spans of the jobs of a BeanstalkServer's local
// engine (tracing/doc.go says which call goes with which event). The engine
// keeps each job's creation context; this keeps the open process span of
// each reserved traced job, keyed by job id, because its outcome may come
// from the reserving connection (delete, release, bury) or from inside the
// engine (TTR expiry, the connection gone), through the engine's TraceHook.
//
// With tracing off the server has no beanstalkTrace (nil), and the read
// loop's hooks are a nil check each.
//
// Lock order: the engine's lock, then mu (the hook runs under the engine
// lock). Nothing calls into the engine while holding mu.
type beanstalkTrace struct {
	tr *tracing.Tracer
	mu sync.Mutex
	// open is the process span of every reserved traced job.
	open map[uint64]openProcess
	// ending is the span of a job's previous reservation while its
	// connection has still to report the outcome that ended it
	// (beanstalk_trace_undone.go).
	ending map[uint64]openProcess
}

// openProcess is a reserved traced job's process span, the number of its
// reservation (JobTrace.Reserves), which the engine's hook calls name,
// and the session that holds it, whose commands alone end it.
type openProcess struct {
	p        tracing.Process
	reserves int
	owner    *engine.Session
}

var (
	_ engine.TraceHook  = (*beanstalkTrace)(nil)
	_ engine.TraceClock = (*beanstalkTrace)(nil)
)

// TraceNow is the spans' clock (Tracer.Now), for the ready times the
// engine keeps: a job's queue wait is then read on the clock of its spans.
func (bt *beanstalkTrace) TraceNow() int64 { return bt.tr.Now().UnixNano() }

// wireTracing makes s trace its jobs with tr; a nil tr leaves tracing off.
func (s *BeanstalkServer) wireTracing(tr *tracing.Tracer) {
	if tr == nil {
		return
	}
	s.trace = &beanstalkTrace{tr: tr, open: make(map[uint64]openProcess), ending: make(map[uint64]openProcess)}
	s.eng.SetTraceHook(s.trace)
}

// beanstalkConnTrace is one connection's tracing state, owned by its
// serve goroutine.
type beanstalkConnTrace struct {
	send  tracing.Send    // the put being made
	cmd   tracing.Command // the stats or peek command being answered
	start time.Time       // when the current command was read
	wrap  []byte          // the payload envelope buffer of the last RESERVED
	// sess is the engine session of the reserve being answered, which
	// notes its job's trace (Session.ReservedTrace).
	sess *engine.Session
}

// before runs before sess executes cmd: a put starts its send span and
// hands the creation context to the engine.
func (bt *beanstalkTrace) before(ct *beanstalkConnTrace, sess *engine.Session, cmd *wire.Command) {
	// The clock is read only for the commands whose spans start here: on
	// the data path every reading counts.
	if isBeanstalkStatsVerb(cmd.Verb) {
		ct.start = bt.tr.Now()
		if bt.tr.CommandSpans() {
			_, ct.cmd = bt.tr.StartCommand(context.Background(), tracing.Message{
				Operation: cmd.Verb.String(), Destination: string(cmd.Tube), Start: ct.start,
			})
		}
		return
	}
	switch cmd.Verb {
	case wire.Reserve, wire.ReserveWithTimeout, wire.ReserveJob:
		ct.start = bt.tr.Now() // the receive span's start
		ct.sess = sess
		return
	case wire.Put:
		ct.start = bt.tr.Now()
	default:
		return
	}
	// Unsampled jobs cost no lookups and no engine memory: their receive
	// and process spans would not be recorded anyway (parent-based).
	ct.send = bt.tr.StartSendBare(context.Background(), ct.start)
	if ct.send.Recording() {
		ct.send.Describe(tracing.Message{Operation: "put", Destination: sess.Using(), BodySize: len(cmd.Body)})
		// The send span's start is the job's ready time too: the engine
		// need not read the clock again, under its lock.
		sess.SetCreationAt(engine.Creation(ct.send.Creation()), ct.start.UnixNano())
	}
}

// isBeanstalkStatsVerb reports whether v is a stats, list or peek
// command: the monitoring commands that get a span with command_spans on.
func isBeanstalkStatsVerb(v wire.Verb) bool {
	switch v {
	case wire.Stats, wire.StatsTube, wire.StatsJob, wire.ListTubes, wire.ListTubeUsed, wire.ListTubesWatched,
		wire.Peek, wire.PeekReady, wire.PeekDelayed, wire.PeekBuried:
		return true
	}
	return false
}

// rejectedPut records a put the codec refused (JOB_TOO_BIG,
// EXPECTED_CRLF): a send span that failed at once.
func (bt *beanstalkTrace) rejectedPut(sess *engine.Session, kind wire.ReplyKind) {
	bt.tr.StartSend(context.Background(), tracing.Message{
		Operation: "put", Destination: sess.Using(),
	}).Fail(kind.String())
}

// after runs once cmd has its reply r, before r is written. It may point
// r.Body at ct.wrap (payload envelope), valid until the next command.
func (bt *beanstalkTrace) after(ct *beanstalkConnTrace, cmd *wire.Command, r *wire.Reply) {
	if isBeanstalkStatsVerb(cmd.Verb) {
		errType := ""
		if r.Kind != wire.OK && r.Kind != wire.Found {
			errType = r.Kind.String()
		}
		ct.cmd.End(errType)
		ct.cmd = tracing.Command{}
		return
	}
	switch cmd.Verb {
	case wire.Put:
		if !ct.send.Recording() {
			ct.send.End()
		} else if r.Kind == wire.Inserted {
			ct.send.CreatedNum("", r.ID) // formatted by the exporter
		} else {
			ct.send.Fail(r.Kind.String())
		}
		ct.send = tracing.Send{}
	case wire.Reserve, wire.ReserveWithTimeout, wire.ReserveJob:
		if r.Kind == wire.Reserved {
			bt.reserved(ct, cmd.Verb, r)
		}
	case wire.Delete:
		if r.Kind == wire.Deleted {
			bt.take(ct.sess, cmd.ID).Complete()
		}
	case wire.Release:
		switch r.Kind {
		case wire.Released:
			bt.take(ct.sess, cmd.ID).Release(cmd.Pri, time.Duration(cmd.Delay)*time.Second)
		case wire.Buried: // released into a server out of memory: buried instead
			bt.take(ct.sess, cmd.ID).Bury(cmd.Pri)
		}
	case wire.Bury:
		if r.Kind == wire.Buried {
			bt.take(ct.sess, cmd.ID).Bury(cmd.Pri)
		}
	case wire.Touch:
		if r.Kind == wire.Touched {
			bt.mu.Lock()
			o := bt.open[cmd.ID]
			bt.mu.Unlock()
			if o.owner == ct.sess {
				o.p.Touch()
			}
		}
	}
}

// reserved records a job handed to the connection: the receive span, and
// the process span kept until the job's outcome.
func (bt *beanstalkTrace) reserved(ct *beanstalkConnTrace, verb wire.Verb, r *wire.Reply) {
	// The reservation noted the trace under the engine lock it held
	// anyway: asking the engine again would take that lock once more.
	if ct.sess == nil {
		return // no reserve went through before: nothing to trace
	}
	jt, ok := ct.sess.ReservedTrace(r.ID)
	if !ok {
		return // put while tracing was off, or not sampled
	}
	c := tracing.Creation(jt.Creation)
	m := tracing.Message{
		Operation: verb.String(), Destination: jt.Tube, IDNum: r.ID,
		BodySize: jt.BodySize, Enqueued: jt.Ready, Attempt: jt.Reserves, Start: ct.start,
	}
	p := bt.tr.Deliver(c, m)
	// The check and the insert are one step under mu, as the hook's calls
	// are: the engine's undoing of this reservation comes either before
	// (seen here) or after (finds the span open); beanstalk_trace_undone.go.
	bt.mu.Lock()
	stale, timedOut := ct.sess.ReservedUndone()
	var lost openProcess
	if !stale {
		lost = bt.supersedeLocked(r.ID)
		bt.open[r.ID] = openProcess{p: p, reserves: jt.Reserves, owner: ct.sess}
	}
	bt.mu.Unlock()
	lost.p.Fail(tracing.ErrorWorkerLost)
	if body, wrapped := bt.tr.WrapPayload(ct.wrap[:0], p.SpanContext(), r.Body); wrapped {
		ct.wrap = body
		r.Body = body
	}
	if stale {
		// The connection got the job, but its reservation already ended
		// in the engine, and maybe another one began: its span ends now,
		// as the hook would have ended it, and is not kept.
		endUndone(p, timedOut)
	}
}

// take removes and returns job id's open process span held by owner (the
// session whose command ended it); the zero Process, which ignores every
// call, when there is none.
func (bt *beanstalkTrace) take(owner *engine.Session, id uint64) tracing.Process {
	bt.mu.Lock()
	o, ok := bt.open[id]
	if ok && o.owner == owner {
		delete(bt.open, id)
		if e, ok := bt.ending[id]; ok {
			// The previous reservation's connection never reported.
			delete(bt.ending, id)
			defer e.p.Fail(tracing.ErrorWorkerLost)
		}
	} else if o, ok = bt.ending[id]; ok && o.owner == owner {
		delete(bt.ending, id)
	} else {
		o = openProcess{}
	}
	bt.mu.Unlock()
	return o.p
}

// unanswered ends the span a command concerned whose reply its connection
// never got: the connection closed (broken, cut off, or at shutdown) while
// the command waited for the journal. A delete, release or bury may still
// take effect, but this connection will never say how it went, and its
// job may be deleted by another before any later event names it.
func (bt *beanstalkTrace) unanswered(by *engine.Session, cmd *wire.Command) {
	switch cmd.Verb {
	case wire.Delete, wire.Release, wire.Bury:
		bt.take(by, cmd.ID).Fail(tracing.ErrorWorkerLost)
	}
}

// JobTimedOut ends the process span of a job whose TTR ran out. It runs
// under the engine lock; ending a span only queues it (the export queue
// never blocks).
func (bt *beanstalkTrace) JobTimedOut(id uint64, reserves int) {
	bt.returned(id, reserves, true)
}

// JobAbandoned ends the process span of a job whose worker's connection
// closed, at shutdown too.
func (bt *beanstalkTrace) JobAbandoned(id uint64, reserves int) {
	bt.returned(id, reserves, false)
}
