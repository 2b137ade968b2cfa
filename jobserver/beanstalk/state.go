package beanstalk

import (
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// The job state machine. Every move of a job between containers goes
// through these functions, which keep the global and per-tube counters, the
// tube timers and the waiting sessions consistent. Commands compose them:
//
//	put        newJob + enqueue
//	delete     detach/unreserve + free
//	release    unreserve + enqueue
//	bury       unreserve + bury
//	kick       detach + enqueue
//	reserve    detach + reserve
//	TTR expiry unreserve + enqueue
//
// The journal hooks in at the command level (put, delete, release, bury,
// kick, kick-job and reserve-job in session.go), where the whole change is
// known; persist.go says what each writes and why the moves that write
// nothing (reserve, TTR expiry, a delay running out) need no record.

// enqueueLocked puts a job that is in no container into its tube: delayed
// for delay nanoseconds, or ready at once. A ready job goes straight to a
// waiting session if its tube has one and is not paused.
func (e *Engine) enqueueLocked(j *job, delay int64, now int64) {
	t := j.tube
	if j.traced {
		e.traceReadyLocked(j, now, delay)
	}
	if delay > 0 {
		j.state = stateDelayed
		j.deadline = now + delay
		t.delay.push(j)
		e.st.delayed++
		if t.delay.top() == j {
			e.retimeTubeLocked(t)
		}
		return
	}
	j.state = stateReady
	t.ready.push(j)
	e.st.ready++
	if j.pri < urgentThreshold {
		t.urgent++
		e.st.urgent++
	}
	if t.hasWaiters() && !e.pausedLocked(t, now) {
		e.dispatchLocked(t, now)
	}
}

// detachLocked takes a ready, delayed or buried job out of its container.
// Reserved jobs leave through Session.unreserveLocked, since only their
// session may move them.
func (e *Engine) detachLocked(j *job) {
	t := j.tube
	switch j.state {
	case stateReady:
		t.ready.remove(j)
		e.st.ready--
		if j.pri < urgentThreshold {
			t.urgent--
			e.st.urgent--
		}
	case stateDelayed:
		first := t.delay.top() == j
		t.delay.remove(j)
		e.st.delayed--
		if first {
			e.retimeTubeLocked(t)
		}
	case stateBuried:
		t.buried.remove(j)
		e.st.buried--
	default:
		panic("beanstalk: detach of a job in state " + stateNames[j.state])
	}
	j.state = 0
}

// buryLocked puts a job that is in no container at the end of its tube's
// buried FIFO.
func (e *Engine) buryLocked(j *job) {
	e.buriedSeq++
	j.state = stateBuried
	j.deadline = e.buriedSeq
	j.buries++
	j.tube.buried.push(j)
	e.st.buried++
}

// reserveLocked gives a job that is in no container to s, starting its TTR.
func (e *Engine) reserveLocked(s *Session, j *job, now int64) {
	if e.obs != nil {
		e.obs.JobReserved(j.tube.name, time.Duration(max(now-j.created-int64(j.delay)*int64(time.Second), 0)))
	}
	j.state = stateReserved
	j.deadline = now + int64(j.ttr)*int64(time.Second)
	j.reserves++
	if j.traced {
		s.noteReservedTraceLocked(j)
	}
	s.reserved.push(j)
	s.noteReservedLocked(j)
	j.tube.reserved++
	e.st.reserved++
	s.retimeLocked()
}

// unreserveLocked takes one of s's reserved jobs back from it.
func (s *Session) unreserveLocked(j *job) {
	s.reserved.remove(j)
	j.tube.reserved--
	s.e.st.reserved--
	j.state = 0
	s.retimeLocked()
}

// freeLocked forgets a job that is in no container.
func (e *Engine) freeLocked(j *job) {
	e.traceFreeLocked(j)
	e.jobs.remove(j.id)
	e.unrefLocked(j.tube)
	j.tube = nil
	j.body = nil
}

// dispatchLocked hands t's ready jobs to the sessions waiting on t, best job
// to the waiter beanstalkd would pick (waitList.pick), while both last.
// Since every other tube keeps the invariant "no unpaused tube has both
// waiters and ready jobs", t's best job is the best job any of these
// sessions could get, as in beanstalkd's process_queue.
func (e *Engine) dispatchLocked(t *tube, now int64) {
	for t.waiters.len() > 0 && t.ready.len() > 0 {
		j := t.ready.top()
		s := t.waiters.pick().s
		e.detachLocked(j)
		s.stopWaitingLocked()
		e.reserveLocked(s, j, now)
		s.finishLocked(wire.Reserved, j)
	}
}

// pausedLocked reports whether t is paused at now, ending a pause that has
// run out before its timer fired.
func (e *Engine) pausedLocked(t *tube, now int64) bool {
	if !t.paused {
		return false
	}
	if t.unpauseAt > now {
		return true
	}
	t.paused = false
	t.pause = 0
	e.retimeTubeLocked(t)
	return false
}

// unpauseLocked ends t's pause and serves its waiters.
func (e *Engine) unpauseLocked(t *tube, now int64) {
	if t.paused {
		t.paused = false
		t.pause = 0
		e.retimeTubeLocked(t)
	}
	if t.hasWaiters() {
		e.dispatchLocked(t, now)
	}
}
