package beanstalk

import (
	"math"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// reserve runs reserve and reserve-with-timeout. It answers at once when a
// job is ready in a watched, unpaused tube, when the session has a
// reservation in its DEADLINE_SOON margin, or when the timeout is 0;
// otherwise the session joins the waiters of every watched tube and Exec
// reports the reply as pending.
func (s *Session) reserve(cmd *wire.Command, r *wire.Reply) bool {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.cmd[cmd.Verb]++
	if !s.worker {
		s.worker = true
		e.st.workers++
	}
	now := e.now()
	// beanstalkd answers DEADLINE_SOON right away only when nothing is
	// ready in the watched tubes, paused or not.
	if s.deadlineSoon(now) && !s.anyReady() {
		r.Kind = wire.DeadlineSoon
		return true
	}
	if j := s.bestReadyLocked(now); j != nil {
		// beanstalkd serves even this reserve through its waiting sets:
		// the session joins them and is picked from the job's tube, whose
		// set held nobody else, which leaves that tube's cursor at 1.
		j.tube.waiters.last = 1
		e.detachLocked(j)
		e.reserveLocked(s, j, now)
		r.Kind, r.ID, r.Body = wire.Reserved, j.id, j.body
		return true
	}
	// A wait that starts inside the margin ends at once (jobs are ready
	// only in paused tubes).
	if s.deadlineSoon(now) {
		r.Kind = wire.DeadlineSoon
		return true
	}
	if cmd.Verb == wire.ReserveWithTimeout && cmd.Timeout == 0 {
		r.Kind = wire.TimedOut
		return true
	}
	s.startWaitLocked(cmd.Verb == wire.ReserveWithTimeout, now+int64(cmd.Timeout)*int64(time.Second))
	return false
}

// deadlineSoon reports whether a reservation of s is in its last second.
func (s *Session) deadlineSoon(now int64) bool {
	j := s.reserved.top()
	return j != nil && now >= j.deadline-safetyMargin
}

func (s *Session) anyReady() bool {
	for _, t := range s.watch {
		if t.ready.len() > 0 && s.mayReserve(t) {
			return true
		}
	}
	return false
}

// bestReadyLocked returns the ready job with the least (pri, id) among the
// watched tubes that are not paused.
func (s *Session) bestReadyLocked(now int64) *job {
	var best *job
	for _, t := range s.watch {
		j := t.ready.top()
		if j == nil || s.e.pausedLocked(t, now) || !s.mayReserve(t) {
			continue
		}
		if best == nil || j.pri < best.pri || (j.pri == best.pri && j.id < best.id) {
			best = j
		}
	}
	return best
}

// reserveJobLocked runs reserve-job. Taking a delayed or buried job is
// journaled as making it ready (see persist.go), since nothing else would
// be journaled when its TTR runs out or its session closes.
func (s *Session) reserveJobLocked(id uint64, r *wire.Reply, now int64) Ticket {
	e := s.e
	j := e.visible(id)
	if j == nil || j.state == stateReserved {
		r.Kind = wire.NotFound
		return nil
	}
	if !s.worker {
		s.worker = true
		e.st.workers++
	}
	from := j.state
	e.detachLocked(j)
	e.reserveLocked(s, j, now)
	r.Kind, r.ID, r.Body = wire.Reserved, j.id, j.body
	if e.jr == nil || from == stateReady {
		return nil
	}
	return e.journalUpdate(j)
}

func (s *Session) startWaitLocked(timed bool, until int64) {
	if cap(s.waits) < len(s.watch) {
		s.waits = make([]waiter, len(s.watch))
	}
	s.waits = s.waits[:len(s.watch)]
	for i, t := range s.watch {
		w := &s.waits[i]
		if !s.mayReserve(t) {
			w.s = nil // not waited on: see stopWaitingLocked
			continue
		}
		w.s = s
		t.waiters.pushBack(w)
	}
	s.waiting = true
	s.timed = timed
	s.waitUntil = until
	s.e.st.waiting++
	s.retimeLocked()
}

// stopWaitingLocked takes s out of every tube's waiters. The watch list
// cannot have changed since the wait began: the session is blocked.
func (s *Session) stopWaitingLocked() {
	if !s.waiting {
		return
	}
	for i, t := range s.watch {
		if s.waits[i].s != nil {
			t.waiters.remove(&s.waits[i])
			s.waits[i].s = nil
		}
	}
	s.waiting = false
	s.timed = false
	s.e.st.waiting--
	s.retimeLocked()
}

// finishLocked records the answer of the pending reserve and tells the
// session's owner.
func (s *Session) finishLocked(kind wire.ReplyKind, j *job) {
	s.answered = true
	s.answer = kind
	s.answerJob = j
	if s.notify != nil {
		s.notify()
	}
}

// Result collects the reply of a pending reserve, or of a command
// ExecAsync left waiting for the journal, into *r. It reports false,
// leaving *r alone, while it is still waiting.
func (s *Session) Result(r *wire.Reply) bool {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if s.durPending {
		return s.durResultLocked(r) // ExecAsync (async.go)
	}
	if !s.answered {
		return false
	}
	*r = wire.Reply{Kind: s.answer}
	if j := s.answerJob; j != nil {
		r.ID, r.Body = j.id, j.body
	}
	s.answered = false
	s.answerJob = nil
	return true
}

// Cancel ends a pending reserve now, with TIMED_OUT, unless it already
// ended with DEADLINE_SOON or TIMED_OUT. If it had already been handed a
// job that Result has not collected, the job goes back to ready at once,
// in its old place, as if never reserved. Result then returns the final
// answer; notify is not called. Cancel without a pending reserve does
// nothing.
//
// A gateway racing one reserve over several backends cancels the losers
// with this, so no job is stolen.
func (s *Session) Cancel() {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case s.waiting:
		s.stopWaitingLocked()
		s.answered, s.answer, s.answerJob = true, wire.TimedOut, nil
	case s.answered && s.answer == wire.Reserved:
		if j := s.answerJob; j.tube != nil && s.owns(j) {
			s.unreserveLocked(j)
			j.reserves--
			e.enqueueLocked(j, 0, e.now())
		}
		s.answer, s.answerJob = wire.TimedOut, nil
	}
}

// retimeLocked recomputes when s next needs the timer: its first TTR
// deadline (a second sooner while it waits, for DEADLINE_SOON) or the end
// of a timed wait.
func (s *Session) retimeLocked() {
	next := int64(math.MaxInt64)
	if j := s.reserved.top(); j != nil {
		next = j.deadline
		if s.waiting {
			next -= safetyMargin
		}
	}
	if s.waiting && s.timed && s.waitUntil < next {
		next = s.waitUntil
	}
	e := s.e
	if next == math.MaxInt64 || s.closed {
		e.sessTimers.remove(s)
		return
	}
	if s.timerIdx >= 0 && s.tickAt == next {
		return
	}
	s.tickAt = next
	e.sessTimers.set(s)
	e.armLocked(next)
}

// timeoutLocked handles what came due for s, in beanstalkd's order: a wait
// in the DEADLINE_SOON margin ends, expired reservations go back to ready
// (counting a timeout), and a wait past its timeout ends with TIMED_OUT.
func (s *Session) timeoutLocked(now int64) {
	e := s.e
	if s.waiting && s.deadlineSoon(now) {
		s.stopWaitingLocked()
		s.finishLocked(wire.DeadlineSoon, nil)
	}
	for j := s.reserved.top(); j != nil && j.deadline <= now; j = s.reserved.top() {
		e.st.timeouts++
		j.timeouts++
		s.unreserveLocked(j)
		e.traceReturnedLocked(s, j, true)
		e.enqueueLocked(j, 0, now)
	}
	if s.waiting && s.timed && s.waitUntil <= now {
		s.stopWaitingLocked()
		s.finishLocked(wire.TimedOut, nil)
	}
	s.retimeLocked()
}

// Close ends the session: a pending reserve is dropped, reserved jobs
// (including one handed to a pending reserve and not yet collected) go back
// to ready, and the session's tube references are released. Close is
// idempotent.
func (s *Session) Close() {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed {
		return
	}
	s.stopWaitingLocked()
	s.answered, s.answerJob = false, nil
	now := e.now()
	// Oldest reservation first (reserve_order.go). s waits no more, so
	// what enqueueLocked hands out goes to other sessions.
	for _, re := range s.resOrder {
		if !s.current(re) {
			continue
		}
		j := re.j
		s.unreserveLocked(j)
		e.traceReturnedLocked(s, j, false)
		e.enqueueLocked(j, 0, now)
	}
	s.resOrder = nil
	s.closed = true
	e.sessTimers.remove(s)
	s.use.using--
	e.unrefLocked(s.use)
	for i, t := range s.watch {
		t.watching--
		e.unrefLocked(t)
		s.watch[i] = nil
	}
	s.watch = nil
	e.st.conns--
	if s.producer {
		e.st.producers--
	}
	if s.worker {
		e.st.workers--
	}
}
