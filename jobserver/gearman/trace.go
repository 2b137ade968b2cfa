package gearman

import "time"

// Tracing support. The engine does not trace: it keeps each traced job's
// creation context, an opaque 26-byte value (tracing.Creation in the proxy),
// beside the job and in its journal record, says which job a session's last
// submit or grab concerned, and tells a TraceHook about runs that end
// without a WORK_* packet (worker gone, CAN_DO_TIMEOUT, CANT_DO), so the
// proxy can make the spans. Untraced jobs pay nothing: the contexts live
// behind the job's ext pointer, which it shares with a reduce job's
// reducer, both rare, so the job struct did not grow for it.

// CreationLen is the size of a creation context.
const CreationLen = 26

// Creation is a job's creation context, opaque to the engine. The zero
// value means "not traced".
type Creation [CreationLen]byte

// jobExt is what only some jobs have, behind one pointer of the job: a
// traced job's trace, a reduce job's reducer. The traces were a side map
// keyed by job id: an insert, a delete and three or four look-ups per
// traced job, about 0.2 µs of it under perf (docs/BENCHMARKS.md, Tracing,
// round 14); a pointer and a free list cost a few nanoseconds. 48 bytes,
// a size class of its own.
type jobExt struct {
	creation Creation
	traced   bool    // creation is the job's; false: a reducer alone
	ready    int64   // traced: unix ns when the job last entered its ready queue; 0: unknown
	reducer  *string // reduce jobs only
}

// maxFreeExts bounds the engine's free list of jobExt, as maxFreeJobs
// does its jobs.
const maxFreeExts = 1024

// trace returns j's trace, nil when j is untraced.
func (j *job) trace() *jobExt {
	if x := j.ext; x != nil && x.traced {
		return x
	}
	return nil
}

// reducer returns j's reducer, nil for a job that is not a reduce job.
func (j *job) reducer() *string {
	if j.ext == nil {
		return nil
	}
	return j.ext.reducer
}

// extOf returns j's ext, taking one (from the free list when it can) if
// j has none.
func (e *Engine) extOf(j *job) *jobExt {
	if j.ext == nil {
		if n := len(e.freeExts); n > 0 {
			j.ext = e.freeExts[n-1]
			e.freeExts[n-1] = nil
			e.freeExts = e.freeExts[:n-1]
		} else {
			j.ext = new(jobExt)
		}
	}
	return j.ext
}

// freeExt recycles j's ext, as freeJob recycles j: nothing else refers to
// it (JobTrace and the hooks get copies).
func (e *Engine) freeExt(j *job) {
	x := j.ext
	j.ext = nil
	if len(e.freeExts) < maxFreeExts {
		*x = jobExt{}
		e.freeExts = append(e.freeExts, x)
	}
}

// ReturnReason says why a running job went back to its queue (or was
// dropped) without WORK_COMPLETE, WORK_FAIL or WORK_EXCEPTION.
type ReturnReason uint8

// The reasons, with the error.type the proxy records for each.
const (
	ReturnWorkerLost ReturnReason = iota // the worker's connection closed: "worker_lost"
	ReturnTimeout                        // its CAN_DO_TIMEOUT ran out: "timeout"
	ReturnCantDo                         // the worker gave the function up: "cant_do"
)

// String returns the error.type of r.
func (r ReturnReason) String() string {
	switch r {
	case ReturnTimeout:
		return "timeout"
	case ReturnCantDo:
		return "cant_do"
	}
	return "worker_lost"
}

// TraceHook receives the ends of traced jobs' runs that no request shows.
// The engine calls it with its lock held: methods must be quick, must not
// block and must not call into the engine.
type TraceHook interface {
	// JobReturned is traced job id taken back from its worker for why.
	JobReturned(id uint64, why ReturnReason)
}

// JobTrace describes a traced job.
type JobTrace struct {
	// Creation is the context given with the submit.
	Creation Creation
	// Function is the job's function name.
	Function string
	// Unique is the job's unique id.
	Unique string
	// Attempt is which run this is, from 1: failed runs so far plus one.
	Attempt int
	// Ready is when the job last entered its ready queue; zero if unknown.
	Ready time.Time
	// BodySize is the workload's length.
	BodySize int
}

// TraceClock, when the TraceHook also implements it, is the clock of the
// ready times the engine keeps for traced jobs (JobTrace.Ready): the
// proxy's spans have a clock of their own, and a job's queue wait is the
// difference of two readings, which must come from one clock. Without it
// the engine's clock serves.
type TraceClock interface {
	// TraceNow returns the current time in Unix nanoseconds.
	TraceNow() int64
}

// AssignHook, when the TraceHook also implements it, sees each traced
// job's workload as it is assigned and may return another to send in its
// JOB_ASSIGN* instead (the proxy's payload traceparent envelope). The
// stored job is unchanged. It is called with the engine lock held; the
// returned slice must stay valid until the next call.
type AssignHook interface {
	JobAssigning(id uint64, jt JobTrace, data []byte) []byte
}

// SetTraceHook makes h (nil: none) receive traced jobs' returns, and
// their assignments if it is an AssignHook; if it is a TraceClock, traced
// jobs' ready times are read from it, and the traced jobs restored from
// the journal become ready now on it.
func (e *Engine) SetTraceHook(h TraceHook) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.thook = h
	e.ahook, _ = h.(AssignHook)
	e.tclock, _ = h.(TraceClock)
	if e.tclock != nil && e.jr != nil {
		e.traceReadyRestored(e.tclock)
	}
}

// SetCreation gives the session's next submit the creation context c,
// kept if the submit creates a job. Call it from the goroutine that calls
// Handle, before Handle.
func (s *Session) SetCreation(c Creation) { s.creation, s.submitAt = c, 0 }

// SetCreationAt is SetCreation with the submit's time at, in Unix
// nanoseconds on the hook's TraceClock: the job's ready time when the
// submit queues it at once (in memory, not for a later epoch), instead of
// a reading of the clock under the engine lock. The proxy reads that
// clock for the submit's send span anyway; the queue wait then counts
// from the submit's start.
func (s *Session) SetCreationAt(c Creation, at int64) {
	if c == (Creation{}) {
		at = 0 // untraced: no time to keep
	}
	s.creation, s.submitAt = c, at
}

// LastJob returns the id of the job the last Handle concerned: created or
// coalesced onto by a SUBMIT_JOB*, assigned by a GRAB_JOB*; 0 when it
// concerned none. Like Outcome, call it from the goroutine that called
// Handle, after it returned.
func (s *Session) LastJob() uint64 { return s.lastJob }

// LastJobTraced reports whether LastJob is a traced job, as of the last
// Handle; so the proxy asks JobTrace only for those. Same rules as LastJob.
func (s *Session) LastJobTraced() bool { return s.lastTraced }

// LastError returns the ERROR code of the last Handle's reply to its
// session, or "" when it sent none. Same rules as LastJob.
func (s *Session) LastError() string { return s.lastErr }

// JobID returns the job id of handle h if h has this engine's form; it
// does not say whether the job exists. It takes no lock.
func (e *Engine) JobID(h []byte) (uint64, bool) {
	if len(h) <= len(e.prefix) || string(h[:len(e.prefix)]) != string(e.prefix) {
		return 0, false
	}
	digits := h[len(e.prefix):]
	if len(digits) > maxCounterLen || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	var id uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		id = id*10 + uint64(c-'0')
	}
	return id, true
}

// AppendHandle appends the handle of job id to dst.
func (e *Engine) AppendHandle(dst []byte, id uint64) []byte { return e.handleID(dst, id) }

// JobTrace returns what the engine keeps for traced job id, or false for
// an untraced or finished job.
func (e *Engine) JobTrace(id uint64) (JobTrace, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[id]
	if j == nil || j.trace() == nil {
		return JobTrace{}, false
	}
	return e.jobTraceOf(j, j.ext), true
}

// LastJobTrace returns what JobTrace(LastJob()) returned as the last
// Handle assigned a traced job with a grab, and false when the last Handle
// was no such grab. It saves the proxy taking the engine lock and looking
// the job up again for every traced assignment. Same rules as LastJob.
func (s *Session) LastJobTrace() (JobTrace, bool) { return s.lastTrace, s.lastTraced }

// jobTraceOf describes traced job j, whose trace is tr.
func (e *Engine) jobTraceOf(j *job, tr *jobExt) JobTrace {
	jt := JobTrace{
		Creation: tr.creation,
		Function: j.fn.name,
		Unique:   string(j.unique()),
		Attempt:  int(j.retries) + 1,
		BodySize: len(j.data()),
	}
	if tr.ready != 0 {
		jt.Ready = time.Unix(0, tr.ready)
	}
	return jt
}

// traceAssigned notes, for LastJobTrace, that s's grab assigned j, and
// returns the workload to send in j's JOB_ASSIGN*: its own, or what the
// AssignHook makes of it for a traced job.
func (e *Engine) traceAssigned(s *Session, j *job) []byte {
	tr := j.trace()
	s.lastTraced = tr != nil
	if tr == nil {
		return j.data()
	}
	s.lastTrace = e.jobTraceOf(j, tr)
	if e.ahook != nil {
		return e.ahook.JobAssigning(j.id, s.lastTrace, j.data())
	}
	return j.data()
}

// traceAttach makes new job j traced with c, which is not zero; it runs
// once j has its id and before its record is written.
func (e *Engine) traceAttach(j *job, c Creation) {
	x := e.extOf(j)
	x.creation, x.traced = c, true
}

// traceReady notes that j entered its ready queue now, on the hook's
// clock if it has one. Not j.at, which an observer makes a clock reading
// (SetObserver): that sequence never goes back, so after the wall clock
// stepped back it stayed ahead of the spans' times for as long as the
// step, and every queue wait came out negative.
func (e *Engine) traceReady(j *job) {
	if tr := j.trace(); tr != nil {
		if e.submitAt != 0 && e.tclock != nil {
			// Queued by the submit that made it (the only enqueue while
			// submitAt is set), at the time the proxy read for its span.
			tr.ready = e.submitAt
		} else if e.tclock != nil {
			tr.ready = e.tclock.TraceNow()
		} else {
			tr.ready = e.now()
		}
	}
}

// traceRestored forgets the ready time of j, restored from the journal
// and placed: the hook, and with it the spans' clock, comes after the
// restore, so the engine's clock stamped it, which may stand far from
// the spans' (a stepped wall clock, a test's fake clock), and so would
// every queue wait. SetTraceHook stamps it on the spans' clock; until
// then, or without a TraceClock, its queue wait is unknown.
func (e *Engine) traceRestored(j *job) {
	if tr := j.trace(); tr != nil {
		tr.ready = 0
	}
}

// traceReadyRestored gives the traced jobs restored to their queues (the
// only queued ones without a ready time) one reading of clk as their
// ready time: their queue wait counts from the restart, on the spans'
// clock. It runs once, as the server sets its hook before it serves.
func (e *Engine) traceReadyRestored(clk TraceClock) {
	now := int64(0)
	for _, j := range e.jobs {
		if tr := j.trace(); tr != nil && tr.ready == 0 && j.state == stateQueued {
			if now == 0 {
				now = clk.TraceNow()
			}
			tr.ready = now
		}
	}
}

// traceFree forgets j's trace; freeJob recycles its ext.
func (e *Engine) traceFree(j *job) {
	if j.ext != nil {
		j.ext.traced = false
	}
}

// traceReturned tells the hook that traced job j's run ended for why.
func (e *Engine) traceReturned(j *job, why ReturnReason) {
	if e.thook != nil && j.trace() != nil {
		e.thook.JobReturned(j.id, why)
	}
}
