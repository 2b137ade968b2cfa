package gearman

import (
	"slices"
	"strconv"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// canDo registers (or re-registers with a new timeout) a function.
func (s *Session) canDo(name []byte, timeout time.Duration) {
	e := s.e
	f := e.function(name)
	for i := range s.abilities {
		if s.abilities[i].fn == f {
			s.abilities[i].timeout = timeout
			return
		}
	}
	s.abilities = append(s.abilities, ability{fn: f, timeout: timeout})
	f.addWorker(s)
	if s.wakeable() {
		f.sleepers++
	}
}

// addWorker puts s on f's worker list just before the next wakeup's
// starting point, so that it takes the last turn, as in gearmand's ring
// of workers.
func (f *function) addWorker(s *Session) {
	f.workers = slices.Insert(f.workers, f.wake, s)
	f.wake = (f.wake + 1) % len(f.workers)
}

// cantDo unregisters a function; jobs of it this worker holds are requeued.
func (s *Session) cantDo(name []byte) {
	e := s.e
	f := e.funcs[string(name)]
	if f == nil {
		return
	}
	for i := range s.abilities {
		if s.abilities[i].fn == f {
			s.abilities = append(s.abilities[:i], s.abilities[i+1:]...)
			f.removeWorker(s)
			if s.wokeFor == f {
				s.wokeFor = nil // the wakeFor below passes it on
			}
			s.requeueFunction(f)
			if s.noopSent {
				e.wakeFor([]ability{{fn: f}})
			}
			return
		}
	}
}

// resetAbilities unregisters every function.
func (s *Session) resetAbilities() {
	e := s.e
	abilities := s.abilities
	s.abilities = nil
	s.wokeFor = nil // the wakeFor below passes it on
	for i := range abilities {
		abilities[i].fn.removeWorker(s)
		s.requeueFunction(abilities[i].fn)
	}
	if s.noopSent {
		e.wakeFor(abilities)
	}
}

// requeueFunction requeues the jobs of f that s holds, newest first.
// requeue takes only j off the list (and may recycle it), so the job
// before it, read first, is still there.
func (s *Session) requeueFunction(f *function) {
	for j := s.running.tail; j != nil; {
		prev := j.prev
		if j.fn == f {
			s.e.requeue(j, ReturnCantDo)
		}
		j = prev
	}
}

// removeWorker takes s off f's worker list.
func (f *function) removeWorker(s *Session) {
	for i, w := range f.workers {
		if w == s {
			if s.wakeable() {
				f.sleepers--
			}
			last := len(f.workers) - 1
			copy(f.workers[i:], f.workers[i+1:])
			f.workers[last] = nil
			f.workers = f.workers[:last]
			if f.wake > i {
				f.wake--
			}
			if f.wake >= len(f.workers) {
				f.wake = 0
			}
			return
		}
	}
}

// preSleep answers PRE_SLEEP: NOOP at once if a job is waiting, otherwise
// the worker sleeps until a job for it arrives. The NOOP at once counts as
// its wakeup (gearmand leaves a worker that slept before as it was, so the
// next job wakes it again): one job wakes one worker here, and a wakeup
// spent on a worker already awake would leave a sleeping one waiting.
func (s *Session) preSleep() {
	if s.e.peekAny(s) {
		s.setWake(false, true)
		s.e.emit(s, codec.Noop)
		return
	}
	s.setWake(true, false)
}

// grab answers GRAB_JOB, GRAB_JOB_UNIQ and GRAB_JOB_ALL.
func (s *Session) grab(t codec.Type) {
	e := s.e
	woke := s.wokeFor
	s.setWake(false, false)
	j := e.take(s)
	if woke != nil && j != nil && j.fn != woke && woke.hasReady() {
		// Woken for a job of one function, it took an older or more
		// urgent job of another: the first job still needs a worker.
		e.wakeOne(woke)
	}
	if j == nil {
		s.outcome = OutcomeMiss // grab runs only inside s's own Handle
		e.emit(s, codec.NoJob)
		return
	}
	e.assign(s, j)
	s.lastJob = j.id
	data := j.data()
	if j.ext != nil {
		data = e.traceAssigned(s, j)
	}
	h := e.handle(e.scratch[:0], j)
	e.scratch = h
	fn := unsafeBytes(j.fn.name)
	switch {
	case t == codec.GrabJob:
		e.emit(s, codec.JobAssign, h, fn, data)
	case t == codec.GrabJobAll && j.reducer() != nil:
		e.emit(s, codec.JobAssignAll, h, fn, j.unique(), unsafeBytes(*j.reducer()), data)
	default:
		e.emit(s, codec.JobAssignUniq, h, fn, j.unique(), data)
	}
}

// owned returns the job with handle h if this session's worker holds it.
func (s *Session) owned(h []byte) *job {
	j := s.e.lookup(h)
	if j == nil || j.state != stateRunning || j.worker != s {
		return nil
	}
	return j
}

// workData forwards WORK_DATA and WORK_WARNING to the job's clients.
func (s *Session) workData(t codec.Type, h, data []byte) {
	e := s.e
	j := s.owned(h)
	if j == nil {
		e.emitError(s, "JOB_NOT_FOUND", "Job does not exist on server")
		return
	}
	for a := j.clients; a != nil; a = a.jnext {
		e.emit(a.s, t, h, data)
	}
}

// workStatus stores and forwards WORK_STATUS.
func (s *Session) workStatus(h, num, den []byte) {
	e := s.e
	j := s.owned(h)
	if j == nil {
		e.emitError(s, "JOB_NOT_FOUND", "Job given in work result not found")
		return
	}
	j.num = atou32(num)
	// gearmand copies the denominator into an 11-byte buffer first, so it
	// reads at most 10 bytes of it.
	j.den = atou32(den[:min(len(den), 10)])
	for a := j.clients; a != nil; a = a.jnext {
		e.emit(a.s, codec.WorkStatus, h, num, den)
	}
}

// workDone handles WORK_COMPLETE, WORK_FAIL and WORK_EXCEPTION: forward to
// the clients and remove the job. Clients without the exceptions option get
// WORK_EXCEPTION as a plain WORK_FAIL (the handle alone; gearmand adds a
// stray NUL that some client libraries reject).
func (s *Session) workDone(t codec.Type, h, data []byte) {
	e := s.e
	j := s.owned(h)
	if j == nil {
		if t == codec.WorkException {
			e.emitError(s, "JOB_NOT_FOUND", "An exception was received for a job that does not exist")
		} else {
			e.emitError(s, "JOB_NOT_FOUND", "Job given in work result not found")
		}
		return
	}
	for a := j.clients; a != nil; a = a.jnext {
		switch {
		case t == codec.WorkFail || (t == codec.WorkException && !a.s.exceptions):
			e.emit(a.s, codec.WorkFail, h)
		default:
			e.emit(a.s, t, h, data)
		}
	}
	if e.obs != nil {
		e.observeDone(j, t == codec.WorkComplete)
	}
	// The worker's next reply waits until the removal is durable, so a
	// worker (and a test) knows a completed job will not come back.
	s.wait(e.finishJob(j))
}

// atou32 parses like atoi into a uint32.
func atou32(b []byte) uint32 {
	n := parseLeadingInt(b)
	return uint32(n)
}

// formatUint is strconv.AppendUint for admin output.
func formatUint(dst []byte, n int) []byte { return strconv.AppendInt(dst, int64(n), 10) }
