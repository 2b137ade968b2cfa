package beanstalk

import (
	"sync"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// Acknowledging after the journal without waiting for the disk
// (ExecAsync).
//
// A server that serves many connections from one event loop must not wait
// for the disk. ExecAsync makes a journaled change as Exec does (under the
// lock, appending its record, which fixes the record order) but does not
// wait for the record to be durable: it returns the command pending. The
// append itself still waits, holding the lock, when the journal already
// has MaxPending bytes (8 MiB by default) queued for its writer
// (journal.Journal.AppendAsync): a disk slower than the changes stalls the
// loop until the writer catches up, as it stalls every other writer. A put's job stays pending,
// invisible to reserve, until its record is durable, exactly as with
// Exec. One completer goroutine per engine, started with the first such
// command, waits for the oldest pending record; the journal completes
// tickets in append order, so it then finishes, under the lock, every
// command whose record is durable (placing a put's job, or dropping it
// and answering INTERNAL_ERROR if the journal failed) and calls each
// session's notify. That is one wakeup per group commit, not per command.
// The session's caller collects the reply with Result, as for a reserve.
//
// With a QuietJournal (the journal on disk), ExecAsync's records do not
// wake the journal's writer: the event loop calls WriteQueued at the end
// of its batch, which writes them on the loop's goroutine when that needs
// no fsync (the interval and never policies) and finishes their commands
// at once; the replies go out in the same batch, with no goroutine in
// between. Otherwise (the always policy, a new segment, another writer at
// work) WriteQueued wakes the writer, and the completer finishes them as
// above.

// durable is a session's command whose reply waits for the journal.
type durable struct {
	t    Ticket     // the command's last record
	job  *job       // a put's pending job; nil for other commands
	r    wire.Reply // the reply: final once done
	done bool       // the record is durable (or failed): Result hands r over
}

// asyncState is the engine's side of ExecAsync, guarded by Engine.mu.
type asyncState struct {
	queue   []*Session // sessions with a pending command, in append order
	cond    sync.Cond  // on Engine.mu: queue became non-empty, or Close
	running bool       // the completer goroutine runs
}

// ExecAsync is Exec for a connection served by a shared event loop: it
// does not wait for a change to be durable (it does wait while the
// journal's queue is full, see the top of the file). Where Exec would
// block until a change is durable, it makes the change and returns false; the session's notify is
// called (with the engine lock held) once the record is durable, and
// Result then returns the reply, INTERNAL_ERROR if the journal failed. A
// reserve that waits returns false as with Exec. Until Result has
// returned the reply, only Result, Cancel (which does not undo a change)
// and Close may be called. Without a journal ExecAsync is Exec. With a
// QuietJournal the caller must call Engine.WriteQueued after its batch of
// ExecAsync calls, before it waits for anything.
func (s *Session) ExecAsync(cmd *wire.Command, r *wire.Reply) bool {
	e := s.e
	if e.jr == nil {
		return s.Exec(cmd, r)
	}
	switch {
	case cmd.Verb == wire.Put:
		*r = wire.Reply{}
		return s.put(cmd, r, true)
	case cmd.Verb == wire.Reserve, cmd.Verb == wire.ReserveWithTimeout, cmd.Verb == wire.Quit, int(cmd.Verb) >= numVerbs:
		return s.Exec(cmd, r)
	}
	*r = wire.Reply{}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.cmd[cmd.Verb]++
	now := int64(-1)
	if !timeless[cmd.Verb] {
		now = e.now()
	}
	e.quiet = e.qjr != nil
	t := s.execLocked(cmd, r, now)
	e.quiet = false
	if t == nil {
		return true
	}
	return s.awaitLocked(t, nil, r)
}

// putPendingLocked is a journaled put that does not wait for its record.
func (s *Session) putPendingLocked(j *job, r *wire.Reply) bool {
	e := s.e
	e.quiet = e.qjr != nil
	t, err := e.pendLocked(s.use, j)
	e.quiet = false
	if err != nil {
		e.putDoneLocked(j, err, r)
		return true
	}
	return s.awaitLocked(t, j, r)
}

// awaitLocked finishes the command whose last record is t at once if t is
// durable already; otherwise it queues the session for the completer and
// returns false.
func (s *Session) awaitLocked(t Ticket, j *job, r *wire.Reply) bool {
	e := s.e
	if ticketDone(t) {
		e.finishDurableLocked(t.Wait(), j, r)
		return true
	}
	s.dur = durable{t: t, job: j, r: *r}
	s.durPending = true
	a := &e.async
	a.queue = append(a.queue, s)
	if e.qjr == nil {
		e.wakeCompleterLocked()
	} // else the record is queued quietly: WriteQueued finishes the command, or wakes the completer
	return false
}

// wakeCompleterLocked starts the completer, or wakes it if it waits for
// the queue to fill.
func (e *Engine) wakeCompleterLocked() {
	a := &e.async
	switch {
	case !a.running:
		a.running = true
		a.cond.L = &e.mu
		go e.runCompleter()
	case len(a.queue) > 0:
		a.cond.Signal()
	}
}

// finishDurableLocked completes a command once its record is durable
// (err nil) or failed.
func (e *Engine) finishDurableLocked(err error, j *job, r *wire.Reply) {
	if j != nil {
		e.putDoneLocked(j, err, r)
		return
	}
	if err != nil {
		*r = wire.Reply{Kind: wire.InternalError}
	}
}

// ticketDone reports whether Wait on t would not block.
func ticketDone(t Ticket) bool {
	d := t.Done()
	if d == nil {
		return true
	}
	select {
	case <-d:
		return true
	default:
		return false
	}
}

// runCompleter is the completer goroutine (see the top of the file). It
// ends at Close once nothing is pending.
func (e *Engine) runCompleter() {
	a := &e.async
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		for len(a.queue) == 0 && !e.closed {
			a.cond.Wait()
		}
		if len(a.queue) == 0 {
			a.running = false
			return
		}
		t := a.queue[0].dur.t
		e.mu.Unlock()
		if e.qjr == nil {
			t.Wait() // the error is read again below, under the lock
		} else if d := t.Done(); d != nil {
			// Only wait: leading the write here (Ticket.Wait) would take
			// quietly queued records from the event loop (WriteQueued).
			<-d
		}
		e.mu.Lock()
		e.finishWrittenLocked()
	}
}

// finishWrittenLocked finishes the queued commands whose records are
// durable (or failed), oldest first, and calls their sessions' notify.
func (e *Engine) finishWrittenLocked() {
	a := &e.async
	n := 0
	for ; n < len(a.queue) && ticketDone(a.queue[n].dur.t); n++ {
		s := a.queue[n]
		e.finishDurableLocked(s.dur.t.Wait(), s.dur.job, &s.dur.r)
		s.dur.t, s.dur.job, s.dur.done = nil, nil, true
		if s.notify != nil && !s.closed {
			s.notify()
		}
	}
	rest := copy(a.queue, a.queue[n:])
	clear(a.queue[rest:])
	a.queue = a.queue[:rest]
}

// WriteQueued writes the records ExecAsync queued, on the caller's
// goroutine, when the journal can do that without an fsync (a QuietJournal
// under the interval or never policy), and then finishes their commands,
// calling each session's notify before it returns; otherwise the journal's
// writer and the completer do both, as without it. With a QuietJournal
// ExecAsync leaves the completer asleep: most commands are finished here,
// and a wake-up per command would cost more than the write. An event loop calls it
// at the end of every batch in which it ran ExecAsync: until then, or until
// something else wakes the journal's writer, those records wait.
func (e *Engine) WriteQueued() {
	if e.qjr == nil {
		return
	}
	wrote := e.qjr.WriteQueued()
	e.mu.Lock()
	if wrote {
		e.finishWrittenLocked()
	}
	if len(e.async.queue) > 0 {
		// Records the journal's writer has (or another goroutine took):
		// the completer finishes their commands when they are durable.
		e.wakeCompleterLocked()
	}
	e.mu.Unlock()
}

// durResultLocked is Result for a command ExecAsync left pending.
func (s *Session) durResultLocked(r *wire.Reply) bool {
	if !s.dur.done {
		return false
	}
	*r = s.dur.r
	s.dur = durable{}
	s.durPending = false
	return true
}
