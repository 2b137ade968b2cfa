package beanstalk

import (
	"sync/atomic"
	"time"
)

// Tracing support. The engine does not trace: it keeps each traced job's
// creation context, an opaque 26-byte value (tracing.Creation in the proxy),
// with the job and in its journal record, and tells a TraceHook about the
// moves that happen inside it (TTR expiry, a reserving session closed), so
// the proxy can make the spans. Untraced jobs pay nothing: the context lives
// in trace slots of the job table's pages (tracetable.go), not in the
// 96-byte job struct, and a page gets them only with its first traced job.

// CreationLen is the size of a creation context.
const CreationLen = 26

// Creation is a job's creation context, opaque to the engine. The zero
// value means "not traced".
type Creation [CreationLen]byte

// jobTrace is what the engine keeps for a traced job.
type jobTrace struct {
	creation Creation
	// ready is when the job last became (or becomes) ready, in Unix
	// nanoseconds on the hook's TraceClock if it has one: put plus delay,
	// release plus delay, TTR expiry, kick.
	ready int64
}

// TraceHook receives the moves of traced jobs that no command reply shows.
// The engine calls it with its lock held: methods must be quick, must not
// block and must not call into the engine. reserves is the job's
// reservation count (JobTrace.Reserves) of the reservation undone: the
// hook may see the move before the reserving connection has handled its
// RESERVED reply (Session.ReservedUndone), or after a later reservation's.
type TraceHook interface {
	// JobTimedOut is a reserved job whose TTR ran out; it is ready again.
	JobTimedOut(id uint64, reserves int)
	// JobAbandoned is a reserved job whose session closed; it is ready
	// again.
	JobAbandoned(id uint64, reserves int)
}

// TraceClock, when the TraceHook also implements it, is the clock of the
// ready times the engine keeps for traced jobs (JobTrace.Ready): the
// proxy's spans have a clock of their own, and a job's queue wait is the
// difference of two readings, which must come from one clock, or a step
// of the wall clock between them shows in the wait. Without it the
// engine's clock serves.
type TraceClock interface {
	// TraceNow returns the current time in Unix nanoseconds.
	TraceNow() int64
}

// JobTrace describes a traced job at its reservation.
type JobTrace struct {
	// Creation is the context given with the put.
	Creation Creation
	// Tube is the job's tube name.
	Tube string
	// Reserves counts the job's reservations so far, this one included.
	Reserves int
	// Ready is when the job last became ready.
	Ready time.Time
	// BodySize is the job body's length.
	BodySize int
}

// SetTraceHook makes h (nil: none) receive the engine's traced-job moves;
// if it is a TraceClock, traced jobs' ready times are read from it.
func (e *Engine) SetTraceHook(h TraceHook) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.thook = h
	e.tclock, _ = h.(TraceClock)
}

// SetCreation gives the session's next put the creation context c. The
// zero c, or no call, leaves the job untraced.
func (s *Session) SetCreation(c Creation) { s.creation, s.putAt = c, 0 }

// SetCreationAt is SetCreation with the put's time at, in Unix nanoseconds
// on the hook's TraceClock: the job's ready time (plus its delay) when the
// put places it at once, as without a journal, instead of a reading of
// the clock under the engine lock. The proxy reads that clock for the
// put's send span anyway; its queue wait then counts from the put's start.
func (s *Session) SetCreationAt(c Creation, at int64) {
	if c == (Creation{}) {
		at = 0 // untraced: no time to keep
	}
	s.creation, s.putAt = c, at
}

// JobTrace returns what the engine keeps for traced job id, or false for an
// untraced or unknown job.
func (e *Engine) JobTrace(id uint64) (JobTrace, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs.get(id)
	if j == nil {
		return JobTrace{}, false
	}
	tr := e.jobs.traceOf(j)
	if tr == nil {
		return JobTrace{}, false
	}
	return JobTrace{
		Creation: tr.creation,
		Tube:     j.tube.name,
		Reserves: int(j.reserves),
		Ready:    readyTime(tr.ready),
		BodySize: len(j.body),
	}, true
}

// ReservedTrace returns the trace of traced job id as the session's
// reservation of it noted it (what JobTrace said at that moment), or false
// when the session's latest reservation of a traced job was of another
// job, or of none. The reservation noted it under the engine lock it
// held anyway, so this takes no lock: call it from the goroutine that
// runs the session's commands, after the RESERVED reply (from Exec or
// Result) and before the next command.
func (s *Session) ReservedTrace(id uint64) (JobTrace, bool) {
	rt := &s.resTrace
	if rt.id != id || id == 0 {
		return JobTrace{}, false
	}
	return JobTrace{
		Creation: rt.creation,
		Tube:     rt.tube,
		Reserves: int(rt.reserves),
		Ready:    readyTime(rt.ready),
		BodySize: rt.bodySize,
	}, true
}

// ReservedUndone reports whether the reservation that ReservedTrace
// describes has been undone since, its job back to ready: by its TTR
// running out (timedOut) or its session closing. The engine has then
// called its TraceHook about it, maybe before the caller opened the
// reservation's span, which nothing would end: the hook's calls and this
// one, made under one lock of the caller's, tell which came first. It
// takes no engine lock: call it as ReservedTrace.
func (s *Session) ReservedUndone() (undone, timedOut bool) {
	switch s.resTrace.undone.Load() {
	case undoneTimedOut:
		return true, true
	case undoneAbandoned:
		return true, false
	}
	return false, false
}

// Values of reservedTrace.undone.
const (
	undoneNot       = iota // the reservation is current, or ended by a command
	undoneTimedOut         // its TTR ran out
	undoneAbandoned        // its session closed
)

// reservedTrace is what ReservedTrace returns, noted at the reservation
// of a traced job. An untraced reservation leaves it: ids are never
// reused, so it cannot be mistaken for the untraced job's.
type reservedTrace struct {
	id       uint64 // 0: none yet
	creation Creation
	reserves uint32
	ready    int64
	tube     string
	bodySize int
	// undone is set, under the engine lock, when the engine undoes this
	// reservation; read without it (ReservedUndone), so atomic.
	undone atomic.Uint32
}

// noteReservedTraceLocked notes what s's reservation of traced job j
// gives ReservedTrace.
func (s *Session) noteReservedTraceLocked(j *job) {
	tr := s.e.jobs.traceOf(j)
	rt := &s.resTrace
	rt.id, rt.creation, rt.reserves, rt.ready = j.id, tr.creation, j.reserves, tr.ready
	rt.tube, rt.bodySize = j.tube.name, len(j.body)
	if rt.undone.Load() != undoneNot { // a load is a plain move; a store, a locked exchange
		rt.undone.Store(undoneNot)
	}
}

// traceAttachLocked makes j traced when its put carried a creation context
// (e.putCreation, which it consumes); it runs once j is in the job table
// and before its record is written.
func (e *Engine) traceAttachLocked(j *job) {
	c, at := e.putCreation, e.putAt
	if c == (Creation{}) {
		return
	}
	e.putCreation, e.putAt = Creation{}, 0
	e.jobs.setTrace(j, c)
	if j.state != statePending {
		// The enqueue that follows (putLocked) takes it. A pending job
		// becomes ready once its record is durable, and other jobs move
		// meanwhile: it reads the clock then.
		e.readyAt = at
	}
}

// traceReadyLocked notes that traced job j becomes ready delay engine
// nanoseconds after now, on the hook's clock if it has one: not e.start
// plus now, which follows the monotonic clock, so that after a step of the
// wall clock it stood off the spans' times (Tracer.Now follows a step) by
// the step, and so did every queue wait.
func (e *Engine) traceReadyLocked(j *job, now, delay int64) {
	tr := e.jobs.traceOf(j)
	if tr == nil {
		return
	}
	if at := e.readyAt; at != 0 {
		e.readyAt = 0
		tr.ready = at + delay
	} else if e.tclock != nil {
		tr.ready = e.tclock.TraceNow() + delay
	} else {
		tr.ready = e.startWall + now + delay
	}
}

// traceFreeLocked forgets j's trace.
func (e *Engine) traceFreeLocked(j *job) {
	if j.traced { // inlined: an untraced job pays this test alone
		e.jobs.clearTrace(j)
	}
}

// traceReturnedLocked tells the hook that j, reserved by s, went back to
// ready without a command: timedOut for a TTR expiry, else a closed
// session. If that was s's reservation that ReservedTrace describes, it
// notes that first, for ReservedUndone.
func (e *Engine) traceReturnedLocked(s *Session, j *job, timedOut bool) {
	if e.thook == nil || !j.traced {
		return
	}
	if rt := &s.resTrace; rt.id == j.id && rt.reserves == j.reserves {
		if timedOut {
			rt.undone.Store(undoneTimedOut)
		} else {
			rt.undone.Store(undoneAbandoned)
		}
	}
	if timedOut {
		e.thook.JobTimedOut(j.id, int(j.reserves))
	} else {
		e.thook.JobAbandoned(j.id, int(j.reserves))
	}
}

// Using returns the name of the tube the session uses, for a put's span.
// Call it from the goroutine that runs the session's commands: only their
// use changes the tube, so it needs no lock (a traced put took the
// engine's lock once more for it, contended by the other event loop).
func (s *Session) Using() string { return s.use.name }

// readyTime is a kept ready time as a time.Time: the zero Time for 0, a
// job that has not become ready since it was restored (a buried job
// reserved with reserve-job after a restart), whose queue wait is unknown.
func readyTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
