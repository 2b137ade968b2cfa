package proxy

import (
	"bytes"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// Foreground submits on a shared line (gearman_gateway_bgline.go). gearmand
// sends a foreground job's WORK_DATA, WARNING, STATUS, COMPLETE, FAIL and
// EXCEPTION to the connection that submitted it, so a line carries them
// too, and the gateway hands each to the client whose submit its handle
// answered.
//
// A unique id may attach several submits to one job, on the line or
// elsewhere. gearmand then sends the line one copy of each packet per
// submit the line made, in a row (it queues them in one pass over the
// job's clients), so a job keeps its waiters in the order their
// JOB_CREATED came, and copy i of each packet goes to waiter i.
//
// A client that leaves does not detach from gearmand: only a closed
// connection does. gearmand drops a queued foreground job whose clients
// all left, and so that such a job is not run, a line one of whose jobs
// has no client left retires: it takes no more submits and closes as soon
// as no client awaits a job on it, which drops the abandoned job if it is
// still queued. Until then the job may still be given to a worker (if one
// frees up before the line's other jobs finish); its result is dropped.
//
// A line does not set the exceptions option, so a client that set it
// keeps its foreground submits on its own session (lineable). One that
// sets it after submitting on a line gets, for those jobs, the WORK_FAIL
// gearmand makes of a WORK_EXCEPTION for a connection without the option.

// gwLineJob is a foreground job submitted on a line.
type gwLineJob struct {
	waiters []gwLineWaiter  // one per submit attached, in JOB_CREATED order
	next    int             // the waiter the next copy of a packet is for
	ended   int             // waiters given their final packet
	first   [1]gwLineWaiter // the room of waiters' first one
}

// awaited reports whether a client that is still there waits for j's
// final packet.
func (j *gwLineJob) awaited() bool {
	for _, w := range j.waiters[j.ended:] {
		if !w.left {
			return true
		}
	}
	return false
}

// gwLineWaiter is one submit attached to a line's job.
type gwLineWaiter struct {
	s    *gwSession
	left bool // s closed: its copies are dropped
}

// isWorkResult reports whether packet type t is one gearmand sends a
// foreground job's clients.
func isWorkResult(t codec.Type) bool {
	switch t {
	case codec.WorkData, codec.WorkWarning, codec.WorkStatus:
		return true
	}
	return isFinal(t)
}

// isFinal reports whether packet type t ends the job for its clients.
func isFinal(t codec.Type) bool {
	switch t {
	case codec.WorkComplete, codec.WorkFail, codec.WorkException:
		return true
	}
	return false
}

// attachLocked records that the JOB_CREATED for handle h answers a
// foreground submit of s: s waits for the job's results on l.
func (l *gwLine) attachLocked(h string, s *gwSession) {
	if l.jobs == nil {
		l.jobs = map[string]*gwLineJob{}
	}
	j := l.jobs[h]
	if j == nil {
		j = &gwLineJob{}
		j.waiters = j.first[:0] // most jobs have one submit: no second allocation
		l.jobs[h] = j
	}
	j.waiters = append(j.waiters, gwLineWaiter{s: s})
}

// idleLocked reports whether no submit waits on l for its reply and no
// client that is still there waits for a foreground job's result.
func (l *gwLine) idleLocked() bool {
	if l.head != len(l.pending) {
		return false
	}
	for _, j := range l.jobs {
		if j.awaited() {
			return false
		}
	}
	return true
}

// work hands WORK_* p, one copy of a packet gearmand sends each submit
// attached to the job, to the client it is for. Runs on the loop
// goroutine.
func (l *gwLine) work(p *codec.Packet) {
	h := p.Arg(0)
	if p.Type == codec.WorkFail {
		// gearmand 1.1 sends the WORK_FAIL it makes of a WORK_EXCEPTION
		// with a NUL after the handle (deliver, on a client's own session).
		h = bytes.TrimSuffix(h, []byte{0})
		p.Args[0] = h
	}
	l.mu.Lock()
	j := l.jobs[string(h)]
	if l.dead || j == nil {
		// No submit on l made this job: gearmand sends none such.
		l.mu.Unlock()
		return
	}
	w := j.waiters[j.next]
	j.next = (j.next + 1) % len(j.waiters)
	final := isFinal(p.Type)
	if final {
		j.ended++
		if j.ended == len(j.waiters) {
			delete(l.jobs, string(h))
		}
	}
	retiredIdle := final && l.retired && l.idleLocked()
	l.mu.Unlock()
	if !w.left {
		w.s.lineWork(l, p, final)
	}
	if retiredIdle {
		l.closeIfIdle()
	}
}

// leave drops s's copies of the results of jobs it submitted on l. A job
// that no client awaits any more retires l (see above).
func (l *gwLine) leave(s *gwSession) {
	l.mu.Lock()
	abandoned := false
	for _, j := range l.jobs {
		for i := range j.waiters {
			if j.waiters[i].s == s {
				j.waiters[i].left = true
			}
		}
		abandoned = abandoned || !j.awaited()
	}
	if abandoned {
		l.retired = true
	}
	idle := l.retired && l.idleLocked()
	l.mu.Unlock()
	if abandoned {
		l.gw.lines.remove(l) // the next submit opens a new line
	}
	if idle {
		l.closeIfIdle()
	}
}

// failLineJobs gives the clients of jobs, those of line l which failed,
// WORK_FAIL: the results will not come (gwSession.forget does the same for
// a client's own session).
func failLineJobs(l *gwLine, jobs map[string]*gwLineJob) {
	for h, j := range jobs {
		for _, w := range j.waiters[j.ended:] {
			if !w.left {
				w.s.lineWork(l, &codec.Packet{Magic: codec.Res, Type: codec.WorkFail, Args: [][]byte{[]byte(h)}}, true)
			}
		}
	}
}

// lineWork writes WORK_* p, a result of a foreground job s submitted on l;
// final says it is the job's last.
func (s *gwSession) lineWork(l *gwLine, p *codec.Packet, final bool) {
	s.mu.Lock()
	if final {
		s.lineJobs--
	}
	if !s.closed {
		s.writeLocked(l.key.b, p)
	}
	s.mu.Unlock()
}

// leaveLines drops s's copies of its foreground jobs' results on the lines
// it used, once s is closed.
func (s *gwSession) leaveLines() {
	s.mu.Lock()
	var lines []*gwLine
	if s.lineJobs > 0 {
		lines = append(lines, s.lines...)
	}
	s.mu.Unlock()
	for _, l := range lines {
		l.leave(s)
	}
}
