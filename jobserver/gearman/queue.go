package gearman

import (
	"math"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// This file holds every job state change: creation, queueing, delay,
// assignment, requeue and removal. The journal hooks in here: submit
// journals a new background job (which stays pending until its record is
// durable, see held.go), finishJob journals its removal.

// submitResult tells the submitter what happened.
type submitResult uint8

const (
	submitCreated submitResult = iota // a new job
	submitExists                      // coalesced onto an existing job
	submitFull                        // maxqueue reached: QUEUE_ERROR
	submitFailed                      // the journal refused the record: QUEUE_ERROR
)

// submit creates a job or finds the one it coalesces with. client is the
// foreground submitter (nil for background). at is the unix ns time the job
// becomes runnable (0: now). gate is the journal flight the job's
// acknowledgement must wait for (0: none): the new job's record, or the
// record of the pending job it coalesced with.
func (e *Engine) submit(fnName, unique, data []byte, prio uint8, client *Session, at int64, reducer []byte) (j *job, res submitResult, gate uint64) {
	f := e.function(fnName)
	dataKey := len(unique) == 1 && unique[0] == '-'
	if j := f.findUnique(unique, data); j != nil {
		if client != nil {
			e.attachClient(j, client)
		}
		switch {
		case j.state == statePending:
			gate = e.flightOf(j)
		case client == nil && e.jr != nil && !j.journaled:
			// A background submit coalesced onto a foreground job:
			// it now has an owner that outlives its clients, so it
			// must survive a restart like any background job.
			seq, err := e.journalJob(j, 0, false)
			if err != nil {
				return nil, submitFailed, 0
			}
			j.bg = true
			gate = seq
		}
		return j, submitExists, gate
	}
	if max := f.maxQueue[prio]; max > 0 && f.total() >= max {
		return nil, submitFull, 0
	}
	j = e.newJob(len(unique) + len(data))
	copy(j.buf, unique)
	copy(j.buf[len(unique):], data)
	e.lastID++
	j.id = e.lastID
	j.fn = f
	j.ulen = uint8(len(unique))
	j.prio = prio
	j.bg = client == nil
	j.dataKey = dataKey
	if len(reducer) > 0 { // an empty reducer is a plain job, as in gearmand
		r := string(reducer)
		e.extOf(j).reducer = &r
	}
	e.jobs[j.id] = j
	if e.submitCreation != (Creation{}) {
		e.traceAttach(j, e.submitCreation)
	}
	f.addUnique(j)
	if client != nil {
		e.attachClient(j, client)
	} else if e.jr != nil {
		seq, err := e.journalJob(j, at, true)
		if err != nil {
			e.dropUnique(j)
			delete(e.jobs, j.id)
			e.traceFree(j)
			e.freeJob(j)
			return nil, submitFailed, 0
		}
		if seq != 0 {
			e.pend(j, at)
			return j, submitCreated, seq
		}
	}
	e.place(j, at)
	return j, submitCreated, 0
}

// enqueue puts j at the tail of its ready queue and wakes one sleeping
// worker for it.
func (e *Engine) enqueue(j *job) {
	f := j.fn
	j.at = e.nextSeq()
	if j.ext != nil {
		e.traceReady(j)
	}
	j.state = stateQueued
	f.queue[j.prio].push(j)
	f.queued[j.prio]++
	e.wakeOne(f)
}

// delay parks j in the timer heap until at.
func (e *Engine) delay(j *job, at int64) {
	j.state = stateDelayed
	j.at = at
	j.fn.delayed++
	e.heap.push(j)
	e.armTimer()
}

// take removes and returns the job s should run next: the highest priority
// first across all of s's functions, and within a priority the one queued
// first.
func (e *Engine) take(s *Session) *job {
	for p := 0; p < numPrio; p++ {
		var best *job
		for i := range s.abilities {
			if h := s.abilities[i].fn.queue[p].head; h != nil && (best == nil || h.at < best.at) {
				best = h
			}
		}
		if best != nil {
			f := best.fn
			f.queue[p].remove(best)
			f.queued[p]--
			return best
		}
	}
	return nil
}

// peekAny reports whether s could grab a job now.
func (e *Engine) peekAny(s *Session) bool {
	for i := range s.abilities {
		if s.abilities[i].fn.hasReady() {
			return true
		}
	}
	return false
}

// assign hands the taken job j to worker s, arming its timeout.
func (e *Engine) assign(s *Session, j *job) {
	j.state = stateRunning
	j.worker = s
	j.fn.running++
	s.running.push(j) // j left its ready queue in take: prev/next are free
	s.nrunning++
	var start int64 // 0 unless an observer needs the run time (observe.go)
	if e.obs != nil {
		start = e.now()
		if j.at >= e.timedFrom {
			e.obs.JobStarted(j.fn.name, time.Duration(max(start-j.at, 0)))
		}
	}
	j.at = start
	if t := s.timeoutFor(j.fn); t > 0 {
		if start == 0 {
			start = e.now()
		}
		j.at = start + int64(t)
		if int64(t) > math.MaxInt64-start {
			j.at = math.MaxInt64 // a timeout past 2262 is none; never a deadline in the past
		}
		e.heap.push(j)
		e.armTimer()
	}
}

// unassign detaches a running job from its worker. s.running stays in
// grab order: a worker that gives its jobs up requeues them newest first,
// as gearmand does. It is a list linked through the job itself, so taking
// a job out of the middle costs O(1) however many jobs the worker holds
// (GRAB_JOB_ALL, or no max_reserved_per_conn), and no memory per job.
func (e *Engine) unassign(j *job) {
	s := j.worker
	s.running.remove(j)
	s.nrunning--
	j.worker = nil
	j.fn.running--
	if j.tidx >= 0 {
		e.heap.remove(j)
	}
	j.state = stateGone // in no queue until enqueue or finishJob
}

// requeue returns a running job whose run failed (worker gone, CANT_DO,
// timeout; why says which) to its queue, or removes it: when it was cancelled, when it is a
// foreground job nobody waits for any more, or when it reached the retry
// limit (its clients then get WORK_FAIL, like gearmand).
func (e *Engine) requeue(j *job, why ReturnReason) {
	e.traceReturned(j, why)
	e.unassign(j)
	if j.retries < 255 {
		j.retries++
	}
	j.num, j.den = 0, 0
	switch {
	case j.cancelled || (!j.bg && j.clients == nil):
		e.finishJob(j)
	case e.cfg.JobRetries > 0 && int(j.retries) >= e.cfg.JobRetries:
		e.failClients(j)
		e.finishJob(j)
	default:
		e.enqueue(j)
	}
}

// failClients sends WORK_FAIL handle to every client of j.
func (e *Engine) failClients(j *job) {
	if j.clients == nil {
		return
	}
	h := e.handle(e.scratch[:0], j)
	e.scratch = h
	for a := j.clients; a != nil; a = a.jnext {
		e.emit(a.s, codec.WorkFail, h)
	}
}

// finishJob removes j from every index: the job is gone. It returns the
// journal flight of the job's Delete record, 0 when none was written.
func (e *Engine) finishJob(j *job) (gate uint64) {
	f := j.fn
	switch j.state {
	case statePending:
		e.pendingJobs.remove(j)
		f.pending--
	case stateQueued:
		f.queue[j.prio].remove(j)
		f.queued[j.prio]--
	case stateDelayed:
		e.heap.remove(j)
		f.delayed--
	case stateRunning:
		e.unassign(j)
	}
	j.state = stateGone
	delete(e.jobs, j.id)
	e.traceFree(j)
	e.dropUnique(j)
	for a := j.clients; a != nil; {
		next := a.jnext
		a.s.unlinkAttach(a)
		e.freeAttach(a)
		a = next
	}
	j.clients = nil
	gate = e.journalDelete(j)
	e.freeJob(j)
	return gate
}

// Recycling finished jobs and their buffers saves the two allocations a
// job otherwise costs, and the garbage collection they cause, when jobs
// come and go at a steady rate. Only small jobs are kept, and at most
// maxFreeJobs of them.
const (
	maxFreeJobs   = 1024
	maxFreeJobBuf = 1024
)

// newJob returns a zeroed job (tidx -1) whose buf has length n.
func (e *Engine) newJob(n int) *job {
	if k := len(e.freeJobs); k > 0 {
		j := e.freeJobs[k-1]
		e.freeJobs[k-1] = nil
		e.freeJobs = e.freeJobs[:k-1]
		if cap(j.buf) >= n {
			j.buf = j.buf[:n]
		} else {
			j.buf = make([]byte, n)
		}
		return j
	}
	return &job{buf: make([]byte, n), tidx: -1}
}

// freeJob recycles j, which no index, queue, heap or session refers to any
// more.
func (e *Engine) freeJob(j *job) {
	if j.ext != nil {
		e.freeExt(j)
	}
	if len(e.freeJobs) >= maxFreeJobs || cap(j.buf) > maxFreeJobBuf {
		return
	}
	*j = job{buf: j.buf[:0], tidx: -1}
	e.freeJobs = append(e.freeJobs, j)
}

// dropUnique removes j from its function's coalescing index.
func (e *Engine) dropUnique(j *job) {
	if j.uniqKey {
		delete(*j.fn.index(j), j.key())
		j.uniqKey = false
	}
}

// attachClient makes s a foreground client of j.
func (e *Engine) attachClient(j *job, s *Session) {
	var a *attach
	if n := len(e.freeAtt); n > 0 {
		a = e.freeAtt[n-1]
		e.freeAtt[n-1] = nil
		e.freeAtt = e.freeAtt[:n-1]
	} else {
		a = new(attach)
	}
	a.s, a.j = s, j
	a.jnext = j.clients
	j.clients = a
	a.sprev = nil
	a.snext = s.attached
	if s.attached != nil {
		s.attached.sprev = a
	}
	s.attached = a
}

// freeAttach recycles an attachment.
func (e *Engine) freeAttach(a *attach) {
	*a = attach{}
	if len(e.freeAtt) < 1024 {
		e.freeAtt = append(e.freeAtt, a)
	}
}

// detachClient removes attachment a (client leaving). A queued or delayed
// foreground job left without clients is dropped; a running one finishes
// its run (its results go nowhere) and is dropped if it must be requeued.
func (e *Engine) detachClient(a *attach) {
	j := a.j
	if j.clients == a {
		j.clients = a.jnext
	} else {
		for p := j.clients; p != nil; p = p.jnext {
			if p.jnext == a {
				p.jnext = a.jnext
				break
			}
		}
	}
	a.s.unlinkAttach(a)
	e.freeAttach(a)
	if j.clients == nil && !j.bg && (j.state == stateQueued || j.state == stateDelayed) {
		e.finishJob(j)
	}
}

// wakeOne sends NOOP to one sleeping worker of f that has not been woken
// yet, round robin, so one new job wakes one worker rather than all.
func (e *Engine) wakeOne(f *function) {
	if f.sleepers == 0 {
		return // the common case under load: nobody to wake
	}
	n := len(f.workers)
	for i := 0; i < n; i++ {
		k := (f.wake + i) % n
		w := f.workers[k]
		if w.wakeable() {
			w.setWake(w.sleeping, true)
			w.wokeFor = f
			f.wake = (k + 1) % n
			e.emit(w, codec.Noop)
			return
		}
	}
}

// wakeFor wakes one worker for each function of fns that has ready jobs;
// used when a woken worker leaves without grabbing.
func (e *Engine) wakeFor(abilities []ability) {
	for i := range abilities {
		if f := abilities[i].fn; f.hasReady() {
			e.wakeOne(f)
		}
	}
}

// armTimer makes sure the clock timer fires at the heap's earliest deadline.
func (e *Engine) armTimer() {
	if len(e.heap) == 0 {
		return
	}
	at := e.heap[0].at
	if e.timer != nil && e.timerAt <= at {
		return
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timerGen++
	gen := e.timerGen
	e.timerAt = at
	d := at - e.now()
	if d < 0 {
		d = 0
	}
	e.timer = e.clk.AfterFunc(timeDuration(d), func() { e.fire(gen) })
}

// fire runs when the timer is due: delayed jobs become ready, running jobs
// past their CAN_DO_TIMEOUT are requeued.
func (e *Engine) fire(gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gen != e.timerGen {
		return // stopped or replaced
	}
	e.timer = nil
	now := e.now()
	for len(e.heap) > 0 && e.heap[0].at <= now {
		j := e.heap[0]
		e.heap.remove(j)
		switch j.state {
		case stateDelayed:
			j.fn.delayed--
			e.enqueue(j)
		case stateRunning:
			e.requeue(j, ReturnTimeout)
		}
	}
	e.armTimer()
}
