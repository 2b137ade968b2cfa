package gearman

import "time"

// Outcome classifies the reply to one request, for a metrics layer to
// count requests by result without parsing what the session wrote.
type Outcome uint8

// The outcomes.
const (
	// OutcomeOK: the request did what was asked (its reply, if any, is
	// not an ERROR or NO_JOB).
	OutcomeOK Outcome = iota
	// OutcomeMiss: a valid negative answer: NO_JOB, or ERROR
	// JOB_NOT_FOUND for a work packet about a job the worker does not
	// hold.
	OutcomeMiss
	// OutcomeClientError: bad input answered with ERROR (INVALID_MAGIC,
	// INVALID_COMMAND, INVALID_ARGUMENT, UNKNOWN_OPTION,
	// ARGUMENT_TOO_LARGE), or a malformed packet that closes the
	// connection.
	OutcomeClientError
	// OutcomeServerError: ERROR QUEUE_ERROR (queue full, journal
	// failure).
	OutcomeServerError
)

// errorOutcome is the Outcome of an ERROR reply with code.
func errorOutcome(code string) Outcome {
	switch code {
	case "JOB_NOT_FOUND":
		return OutcomeMiss
	case codecQueueError:
		return OutcomeServerError
	}
	return OutcomeClientError
}

// Outcome returns the class of the reply to the session's last Handle. It
// must be called from the goroutine that called Handle, after it
// returned; only Handle sets it, so no lock is needed. A journaled submit
// whose write fails later still counts as OutcomeOK here.
func (s *Session) Outcome() Outcome { return s.outcome }

// Observer receives the job lifecycle events a metrics layer counts. The
// engine calls it with its lock held, so every method must be quick (an
// atomic add, a histogram observation), must not block and must not call
// into the engine. fn is valid only for the call.
//
// The interface lives here, not in package metrics, so the engine stays
// free of metric types; proxy adapts it to jobgate's metrics.
type Observer interface {
	// JobSubmitted is a new job created by SUBMIT_JOB* (a submission
	// coalesced onto an existing job by its unique id is not a new job).
	JobSubmitted(fn string)
	// JobStarted is a job handed to a worker (JOB_ASSIGN*) after waiting
	// wait since it last entered its ready queue: its submission, the end
	// of its delay, or its requeue after a failed run.
	JobStarted(fn string, wait time.Duration)
	// JobCompleted is WORK_COMPLETE from the job's worker, run after its
	// assignment.
	JobCompleted(fn string, run time.Duration)
	// JobFailed is WORK_FAIL or WORK_EXCEPTION from the job's worker.
	JobFailed(fn string, run time.Duration)
}

// SetObserver makes o (nil: none) receive the engine's job events from
// now on; one observer per engine, a later call replaces it.
//
// While an observer is set, the enqueue sequence that orders ready jobs
// becomes a strictly increasing nanosecond clock reading, so a queued
// job's at (job.go) is also its enqueue time and the wait needs no field
// of its own (the job struct stays at 112 bytes). Jobs queued before the
// observer was set have no time; their wait is not reported.
func (e *Engine) SetObserver(o Observer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.obs = o
	if o != nil {
		e.seq = max(e.seq+1, e.now())
		e.timedFrom = e.seq
	}
}

// nextSeq returns the next enqueue sequence number: see SetObserver.
func (e *Engine) nextSeq() int64 {
	if e.obs != nil {
		e.seq = max(e.seq+1, e.now())
	} else {
		e.seq++
	}
	return e.seq
}

// runTime is how long running job j has run at now. With an observer set,
// assign stores the assignment time in at, or in a timed run (in the
// timer heap) the deadline, which is the assignment time plus the
// worker's CAN_DO_TIMEOUT. ok is false for a job assigned before the
// observer was set, whose untimed run left at 0.
func (e *Engine) runTime(j *job, now int64) (run time.Duration, ok bool) {
	if j.at == 0 {
		return 0, false
	}
	start := j.at
	if j.tidx >= 0 {
		start -= int64(j.worker.timeoutFor(j.fn))
	}
	return time.Duration(max(now-start, 0)), true
}

// observeDone reports the end of running job j to the observer: completed
// or failed. A job assigned before the observer was set has no run time
// and is not reported.
func (e *Engine) observeDone(j *job, completed bool) {
	run, ok := e.runTime(j, e.now())
	switch {
	case !ok:
	case completed:
		e.obs.JobCompleted(j.fn.name, run)
	default:
		e.obs.JobFailed(j.fn.name, run)
	}
}

// QueueDepths calls emit once per function with its number of queued
// (ready, any priority) and running jobs. It copies the counts under the
// lock and calls emit after releasing it, so a slow caller does not hold
// up the engine.
func (e *Engine) QueueDepths(emit func(fn string, queued, running int)) {
	type depth struct {
		name            string
		queued, running int
	}
	e.mu.Lock()
	ds := make([]depth, 0, len(e.funcList))
	for _, f := range e.funcList {
		ds = append(ds, depth{f.name, f.queued[0] + f.queued[1] + f.queued[2], f.running})
	}
	e.mu.Unlock()
	for _, d := range ds {
		emit(d.name, d.queued, d.running)
	}
}
