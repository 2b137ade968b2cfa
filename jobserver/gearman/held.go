package gearman

import (
	"encoding/binary"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// Acknowledging after the journal without blocking.
//
// The connections of a server may all be served by one goroutine, so a
// request must never wait for the disk. A background submit therefore
// appends its record (AppendAsync, under e.mu, which fixes the order of
// the records) and returns at once; the job stays pending, invisible to
// workers, and its JOB_CREATED is held. The journal writes records in
// batches whose tickets share a Done channel; each distinct batch the
// engine waits for is a flight, numbered in append order. One completer
// goroutine per engine waits for the oldest flight, then, under e.mu,
// retires every finished flight (pending jobs become queued, or are
// dropped if the write failed), releases the held output whose flight is
// done, and calls Config.Notify so the server writes it out. That is one
// wakeup per batch, not per job.
//
// With a QuietJournal (the journal on disk), the requests of sessions an
// event loop serves (SetLoopWrites) append without waking the journal's
// writer or the completer: the loop calls WriteQueued at the end of its
// batch, which writes the records on the loop's goroutine when that needs
// no fsync (the interval and never policies) and retires their flights at
// once, so the held replies go out in the same batch with no goroutine in
// between. Otherwise (the always policy, a new segment, another writer at
// work) WriteQueued wakes the writer and the completer, as above.
//
// Reply order (DESIGN.md, decision 4): once a session has held output,
// everything else for it, replies and async packets alike, queues behind
// it, and goes out in order when released. A session's barrier is the
// newest flight its output must wait for: set by its submits and by the
// Delete records its requests cause (WORK_COMPLETE/FAIL/EXCEPTION, admin
// "cancel job"), so that whatever it receives next proves the change
// durable. Without a journal no flight exists, barrier and doneSeq stay 0
// and the only cost is one comparison per packet.

// flight is a batch of journal records that some output waits for.
type flight struct {
	t    Ticket
	done <-chan struct{}
	seq  uint64
	// maxID is the highest id of a pending job whose record is in this
	// flight or an earlier one: retiring the flight resolves the pending
	// jobs up to it.
	maxID uint64
}

// heldItem is one packet or text held for a session.
type heldItem struct {
	gate     uint64     // the flight that must be durable first
	typ      codec.Type // packet type (unused for text)
	text     bool       // admin text rather than a packet
	created  bool       // a JOB_CREATED decided at release
	job      uint64     // created: the job id
	jflight  uint64     // created: the flight of the job's record
	off, end int        // the item's bytes in Session.heldBuf
}

// track registers the ticket of a record just appended and returns the
// number of its flight, 0 when the ticket is already durable. id is the
// pending job the record creates, 0 for a Delete.
func (e *Engine) track(t Ticket, id uint64) uint64 {
	done := t.Done()
	if done == nil {
		return 0
	}
	n := len(e.flights)
	if n > 0 && e.flights[n-1].done == done {
		f := &e.flights[n-1]
		f.maxID = max(f.maxID, id)
		return f.seq
	}
	maxID := id
	if n > 0 {
		maxID = max(maxID, e.flights[n-1].maxID)
	}
	e.flightSeq++
	e.flights = append(e.flights, flight{t: t, done: done, seq: e.flightSeq, maxID: maxID})
	if n == 0 && !e.quiet { // a quiet record's flight is retired by WriteQueued, or handed on by it
		e.fcond.Signal()
	}
	return e.flightSeq
}

// flightOf returns the flight of pending job j's record.
func (e *Engine) flightOf(j *job) uint64 {
	for i := range e.flights {
		if e.flights[i].maxID >= j.id {
			return e.flights[i].seq
		}
	}
	return 0 // not reached: a pending job's flight is not retired yet
}

// pend parks the new journaled job j until its flight is durable.
func (e *Engine) pend(j *job, at int64) {
	j.state = statePending
	j.at = at
	j.fn.pending++
	e.pendingJobs.push(j)
}

// runCompleter is the completer goroutine (see the comment at the top).
func (e *Engine) runCompleter() {
	defer close(e.completerDone)
	e.mu.Lock()
	for {
		for len(e.flights) == 0 && !e.stopping {
			e.fcond.Wait()
		}
		if len(e.flights) == 0 {
			e.mu.Unlock()
			return
		}
		f := e.flights[0]
		e.mu.Unlock()
		if e.qjr == nil {
			_ = f.t.Wait() // the error is read again below, under the lock
		} else {
			// Only wait: leading the write here (Ticket.Wait) would take
			// quietly queued records from the event loop (WriteQueued).
			<-f.done
		}
		e.mu.Lock()
		e.retireDone()
		notify := e.cfg.Notify
		e.mu.Unlock()
		if notify != nil {
			notify()
		}
		e.mu.Lock()
	}
}

// retireDone retires every finished flight at the head, in order, and
// releases the output they held.
func (e *Engine) retireDone() {
	n := 0
scan:
	for n < len(e.flights) {
		f := e.flights[n] // a copy: retiring may append flights
		select {
		case <-f.done:
		default:
			break scan
		}
		e.retire(f, f.t.Wait())
		n++
	}
	rest := copy(e.flights, e.flights[n:])
	clear(e.flights[rest:])
	e.flights = e.flights[:rest]
	e.releaseHeld()
}

// retire resolves the pending jobs of finished flight f: queued (or
// delayed) when it was written, dropped when the write failed.
func (e *Engine) retire(f flight, err error) {
	if err != nil && f.seq < e.failedSeq {
		e.failedSeq = f.seq
	}
	for j := e.pendingJobs.head; j != nil && j.id <= f.maxID; j = e.pendingJobs.head {
		if err != nil {
			j.journaled = false // the journal has failed: no Delete either
			e.finishJob(j)
			continue
		}
		e.pendingJobs.remove(j)
		j.fn.pending--
		e.place(j, j.at)
	}
	e.doneSeq = f.seq
}

// releaseHeld writes the held output that is no longer gated, in order,
// for every session that has some.
func (e *Engine) releaseHeld() {
	keep := e.heldSess[:0]
	for _, s := range e.heldSess {
		e.releaseSession(s)
		if len(s.held) > 0 {
			keep = append(keep, s)
		} else {
			s.inHeld = false
		}
	}
	clear(e.heldSess[len(keep):])
	e.heldSess = keep
}

// releaseSession writes s's held items up to the first still gated one.
func (e *Engine) releaseSession(s *Session) {
	if s.closed {
		s.held, s.heldBuf = nil, nil
		return
	}
	i := 0
	for ; i < len(s.held) && s.held[i].gate <= e.doneSeq; i++ {
		it := &s.held[i]
		b := s.heldBuf[it.off:it.end]
		switch {
		case it.created && it.jflight >= e.failedSeq:
			e.write(s, codec.Error, []byte(codecQueueError), []byte(textPersistFailed))
		case it.created:
			e.scratch = e.handleID(e.scratch[:0], it.job)
			e.write(s, codec.JobCreated, e.scratch)
		case it.text:
			s.out.WriteText(b)
		default:
			var args [len(e.args)][]byte
			n := 0
			for len(b) > 0 && n < len(args) {
				l, k := binary.Uvarint(b)
				args[n] = b[k : k+int(l)]
				b = b[k+int(l):]
				n++
			}
			e.write(s, it.typ, args[:n]...)
		}
	}
	rest := copy(s.held, s.held[i:])
	s.held = s.held[:rest]
	if rest == 0 {
		s.heldBuf = s.heldBuf[:0]
		if cap(s.heldBuf) > 64<<10 {
			s.heldBuf = nil
		}
	}
}

// gated reports whether output to s must be held.
func (e *Engine) gated(s *Session) bool { return len(s.held) > 0 || s.barrier > e.doneSeq }

// hold queues it for s behind its barrier; args (a packet's) or text are
// copied.
func (e *Engine) hold(s *Session, it heldItem, args [][]byte, text []byte) {
	if s.closed {
		return
	}
	it.gate = s.barrier
	it.off = len(s.heldBuf)
	if it.text {
		s.heldBuf = append(s.heldBuf, text...)
	} else {
		for _, a := range args {
			s.heldBuf = binary.AppendUvarint(s.heldBuf, uint64(len(a)))
			s.heldBuf = append(s.heldBuf, a...)
		}
	}
	it.end = len(s.heldBuf)
	if !s.inHeld {
		s.inHeld = true
		e.heldSess = append(e.heldSess, s)
	}
	s.held = append(s.held, it)
}

// wait raises s's barrier to flight seq: its next output waits for it.
func (s *Session) wait(seq uint64) {
	if seq > s.barrier {
		s.barrier = seq
	}
}

// writeText sends admin text to s, held if s's output is.
func (e *Engine) writeText(s *Session, b []byte) {
	if e.gated(s) {
		e.hold(s, heldItem{text: true}, nil, b)
		return
	}
	s.out.WriteText(b)
}

// The ERROR a submit gets when its job could not be journaled: gearmand's
// answer when its persistent queue fails to add a job (QUEUE_ERROR with
// gearmand_strerror(GEARMAND_QUEUE_ERROR)).
const (
	codecQueueError   = "QUEUE_ERROR"
	textPersistFailed = "GEARMAND_QUEUE_ERROR"
)

// SetLoopWrites says an event loop serves s and calls WriteQueued after
// each batch: with a QuietJournal, the records of s's requests are queued
// without waking the journal's writer, for the loop to write.
func (s *Session) SetLoopWrites() {
	s.e.mu.Lock()
	s.loopWrites = true
	s.e.mu.Unlock()
}

// WriteQueued writes the records that loop sessions' requests queued, on
// the caller's goroutine, when the journal can do that without an fsync (a
// QuietJournal under the interval or never policy), then retires their
// flights and releases the output they held before it returns (to the
// sessions' Outputs: the caller writes it out, as after Handle; Notify is
// not called). Otherwise, or for flights it could not retire, the journal's
// writer and the completer do it, as without it. An event loop calls it at
// the end of every batch; until then, or until something else wakes the
// journal's writer, those records wait.
func (e *Engine) WriteQueued() {
	if e.qjr == nil {
		return
	}
	wrote := e.qjr.WriteQueued()
	e.mu.Lock()
	if wrote {
		e.retireDone()
	}
	if len(e.flights) > 0 {
		e.fcond.Signal()
	}
	e.mu.Unlock()
}
