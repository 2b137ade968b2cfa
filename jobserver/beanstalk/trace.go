package beanstalk

import "time"

// Tracing support. The engine does not trace: it keeps each traced job's
// creation context, an opaque 26-byte value (tracing.Creation in the proxy),
// with the job and in its journal record, and tells a TraceHook about the
// moves that happen inside it (TTR expiry, a reserving session closed), so
// the proxy can make the spans. Untraced jobs pay nothing: the context lives
// in a side map holding only traced jobs, not in the 96-byte job struct,
// and the map stays nil until the first traced put.

// CreationLen is the size of a creation context.
const CreationLen = 26

// Creation is a job's creation context, opaque to the engine. The zero
// value means "not traced".
type Creation [CreationLen]byte

// jobTrace is what the engine keeps for a traced job.
type jobTrace struct {
	creation Creation
	// ready is when the job last became (or becomes) ready, in engine
	// nanoseconds: put plus delay, release plus delay, TTR expiry, kick.
	ready int64
}

// TraceHook receives the moves of traced jobs that no command reply shows.
// The engine calls it with its lock held: methods must be quick, must not
// block and must not call into the engine.
type TraceHook interface {
	// JobTimedOut is a reserved job whose TTR ran out; it is ready again.
	JobTimedOut(id uint64)
	// JobAbandoned is a reserved job whose session closed; it is ready
	// again.
	JobAbandoned(id uint64)
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

// SetTraceHook makes h (nil: none) receive the engine's traced-job moves.
func (e *Engine) SetTraceHook(h TraceHook) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.thook = h
}

// SetCreation gives the session's next put the creation context c. The
// zero c, or no call, leaves the job untraced.
func (s *Session) SetCreation(c Creation) { s.creation = c }

// JobTrace returns what the engine keeps for traced job id, or false for an
// untraced or unknown job.
func (e *Engine) JobTrace(id uint64) (JobTrace, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tr := e.traces[id]
	j := e.jobs.get(id)
	if tr == nil || j == nil {
		return JobTrace{}, false
	}
	return JobTrace{
		Creation: tr.creation,
		Tube:     j.tube.name,
		Reserves: int(j.reserves),
		Ready:    e.start.Add(time.Duration(tr.ready)),
		BodySize: len(j.body),
	}, true
}

// traceAttachLocked makes j traced when its put carried a creation context
// (e.putCreation, which it consumes); it runs once j has its id and before
// its record is written.
func (e *Engine) traceAttachLocked(j *job) {
	c := e.putCreation
	if c == (Creation{}) {
		return
	}
	e.putCreation = Creation{}
	if e.traces == nil {
		e.traces = make(map[uint64]*jobTrace)
	}
	e.traces[j.id] = &jobTrace{creation: c}
}

// traceOf returns j's trace, or nil.
func (e *Engine) traceOf(id uint64) *jobTrace {
	if e.traces == nil {
		return nil
	}
	return e.traces[id]
}

// traceReadyLocked notes that j becomes ready at at.
func (e *Engine) traceReadyLocked(j *job, at int64) {
	if tr := e.traceOf(j.id); tr != nil {
		tr.ready = at
	}
}

// traceFreeLocked forgets j's trace.
func (e *Engine) traceFreeLocked(j *job) {
	if e.traces != nil {
		delete(e.traces, j.id)
	}
}

// traceReturnedLocked tells the hook that reserved job j went back to
// ready without a command: timedOut for a TTR expiry, else a closed
// session.
func (e *Engine) traceReturnedLocked(j *job, timedOut bool) {
	if e.thook == nil || e.traceOf(j.id) == nil {
		return
	}
	if timedOut {
		e.thook.JobTimedOut(j.id)
	} else {
		e.thook.JobAbandoned(j.id)
	}
}

// Using returns the name of the tube the session uses, for a put's span.
// Call it from the goroutine that runs the session's commands: only their
// use changes the tube, so it needs no lock (a traced put took the
// engine's lock once more for it, contended by the other event loop).
func (s *Session) Using() string { return s.use.name }
