package beanstalk

import (
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// numVerbs sizes the per-verb command counters.
const numVerbs = int(wire.Quit) + 1

// Session is one client connection's view of the engine: the tube it uses,
// the tubes it watches, the jobs it has reserved and its pending reserve.
// beanstalkd ties all of these to the connection, and so do we: Close
// returns the reservations.
//
// A Session serves one client: its methods must not be called concurrently
// with each other (the engine itself is safe for any number of sessions).
// While a reserve is pending (Exec returned false), only Result, Cancel and
// Close may be called.
type Session struct {
	e *Engine
	// notify is called, with the engine lock held, when a pending reserve
	// has its answer. It must not block or call into the engine.
	notify func()

	use      *tube
	watch    []*tube // in beanstalkd's list-tubes-watched order
	reserved jobHeap // by TTR deadline
	// resOrder lists the reservations in the order made, for Close
	// (reserve_order.go).
	resOrder []resEntry
	// allow, when set, says which watched tubes reserve may take from
	// (SetReserveFilter).
	allow func(tube []byte) bool

	// The pending reserve. waits holds one queue entry per watched tube.
	waiting   bool
	timed     bool
	waitUntil int64
	waits     []waiter

	// The answer of a finished pending reserve, until Result takes it.
	answered  bool
	answer    wire.ReplyKind
	answerJob *job

	// timerIdx and tickAt place the session in the engine's timer heap
	// while it has a reservation or a timed wait.
	timerIdx int
	tickAt   int64

	producer, worker, closed bool

	buf []byte // the YAML of the last stats or list reply

	creation Creation      // for the next put (trace.go)
	putAt    int64         // its time on the trace clock, 0: none (trace.go)
	resTrace reservedTrace // of the last reservation, if traced (trace.go)

	// A command ExecAsync left waiting for the journal (async.go).
	dur        durable
	durPending bool
}

func (s *Session) at() int64       { return s.tickAt }
func (s *Session) heapIndex() *int { return &s.timerIdx }

// NewSession opens a session using and watching "default". notify (which
// may be nil) is called with the engine lock held whenever a reserve that
// Exec left pending gets its answer; it must return quickly without calling
// into the engine, e.g. by waking the connection's goroutine, which then
// calls Result.
func (e *Engine) NewSession(notify func()) *Session {
	s := &Session{e: e, notify: notify, timerIdx: -1}
	e.mu.Lock()
	defer e.mu.Unlock()
	s.use = e.defaultTube
	s.watch = []*tube{e.defaultTube}
	e.refLocked(e.defaultTube)
	e.refLocked(e.defaultTube)
	e.defaultTube.using++
	e.defaultTube.watching++
	e.st.conns++
	e.st.totalConns++
	return s
}

// Exec runs one command and reports whether *r now holds its reply.
//
// It returns false only for a reserve that has to wait: the reply comes
// later, signalled by the session's notify callback and collected with
// Result (or forced with Cancel). For quit, Exec closes the session and
// sets r.Kind to 0: send nothing and close the connection.
//
// Reply bodies: the body of RESERVED and FOUND is the job's own, never
// modified, so it may be kept; the YAML of OK lives in the session and is
// valid until the next Exec. r.Tube is valid as long as the session.
//
// With a journal (Config.Journal), a command that changes a job (put,
// release, bury, kick, kick-job, delete, reserve-job of a delayed or
// buried job) blocks until its record is durable, without holding the
// engine lock, and answers INTERNAL_ERROR if the journal fails. Call Exec
// from a goroutine that may block (one per connection), never from a
// shared event loop: that one calls ExecAsync (async.go).
func (s *Session) Exec(cmd *wire.Command, r *wire.Reply) bool {
	*r = wire.Reply{}
	switch cmd.Verb {
	case wire.Put:
		s.put(cmd, r, false)
	case wire.Reserve, wire.ReserveWithTimeout:
		return s.reserve(cmd, r)
	case wire.Quit:
		s.Close()
		return true
	default:
		if int(cmd.Verb) >= numVerbs {
			r.Kind = wire.UnknownCommand
			return true
		}
		s.exec(cmd, r)
	}
	return true
}

// exec runs the other commands under the lock.
func (s *Session) exec(cmd *wire.Command, r *wire.Reply) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.cmd[cmd.Verb]++
	now := int64(-1) // never read: reading the clock costs more than these commands
	if !timeless[cmd.Verb] {
		now = e.now()
	}
	t := s.execLocked(cmd, r, now)
	if t == nil {
		return
	}
	// The change is made; acknowledge it once durable. The lock is free
	// meanwhile, so other sessions append to the same group commit.
	e.mu.Unlock()
	err := t.Wait()
	e.mu.Lock()
	if err != nil {
		*r = wire.Reply{Kind: wire.InternalError}
	}
}

// RejectPut records a put the codec refused after reading its line, as
// beanstalkd does: JOB_TOO_BIG and EXPECTED_CRLF count in cmd-put, and
// EXPECTED_CRLF (whose line was fine) makes the connection a producer and
// uses up a job id, since beanstalkd creates the job before it reads the
// body. Other kinds are ignored.
func (s *Session) RejectPut(kind wire.ReplyKind) {
	if kind != wire.JobTooBig && kind != wire.ExpectedCRLF {
		return
	}
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.cmd[wire.Put]++
	if kind == wire.ExpectedCRLF {
		e.nextID++
		if !s.producer {
			s.producer = true
			e.st.producers++
		}
	}
}

// put builds the job outside the lock, so the body copy does not hold up
// other sessions. With async, a journaled put does not wait: it returns
// false and the reply comes through notify and Result (async.go).
func (s *Session) put(cmd *wire.Command, r *wire.Reply, async bool) bool {
	e := s.e
	// The creation given for this put is for this put only: one refused
	// (JOB_TOO_BIG, DRAINING) must not trace the next under its span.
	creation, putAt := s.creation, s.putAt
	s.creation, s.putAt = Creation{}, 0
	if len(cmd.Body) > e.maxJobSize {
		e.mu.Lock()
		e.st.cmd[wire.Put]++
		e.mu.Unlock()
		r.Kind = wire.JobTooBig
		return true
	}
	ttr := cmd.TTR
	if ttr == 0 {
		ttr = 1 // beanstalkd silently raises it
	}
	j := &job{pri: cmd.Pri, delay: cmd.Delay, ttr: ttr, idx: -1}
	if cmd.BodyOwned { // read into its own buffer (wire.Decoder.DirectMin): keep it
		j.body = cmd.Body
	} else {
		j.body = make([]byte, len(cmd.Body))
		copy(j.body, cmd.Body)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.cmd[wire.Put]++
	if !s.producer {
		s.producer = true
		e.st.producers++
	}
	if e.draining {
		e.nextID++ // beanstalkd made the job, with an id, before refusing it
		r.Kind = wire.Draining
		return true
	}
	e.putCreation, e.putAt = creation, putAt
	if e.jr != nil {
		if async {
			return s.putPendingLocked(j, r)
		}
		e.putDurableLocked(s.use, j, r)
		return true
	}
	e.putLocked(s.use, j, e.now())
	r.Kind = wire.Inserted
	r.ID = j.id
	return true
}

// putDurableLocked is put with a journal: the job stays pending, invisible,
// until its Full record is durable, and is then placed ready or delayed,
// its delay counted from the put as the record says. On a journal error
// the job is dropped and the reply is INTERNAL_ERROR. It unlocks e.mu while
// it waits.
func (e *Engine) putDurableLocked(t *tube, j *job, r *wire.Reply) {
	tk, err := e.pendLocked(t, j)
	if err == nil {
		e.mu.Unlock()
		err = tk.Wait()
		e.mu.Lock()
	}
	e.putDoneLocked(j, err, r)
}

// pendLocked adds the new job j to t as pending, invisible, and appends
// its Full record.
func (e *Engine) pendLocked(t *tube, j *job) (Ticket, error) {
	j.id = e.nextID
	e.nextID++
	j.created = e.now()
	j.tube = t
	j.state = statePending
	e.refLocked(t)
	e.jobs.add(j)
	e.traceAttachLocked(j)
	return e.journalFull(j)
}

// putDoneLocked finishes a journaled put once its record is durable (err
// nil) or failed: the job is placed, or dropped with INTERNAL_ERROR.
func (e *Engine) putDoneLocked(j *job, err error, r *wire.Reply) {
	t := j.tube
	j.state = 0
	if err != nil {
		e.freeLocked(j)
		r.Kind = wire.InternalError
		return
	}
	t.totalJobs++
	e.st.totalJobs++
	now := e.now()
	if e.obs != nil {
		e.obs.JobPut(t.name)
	}
	e.enqueueLocked(j, max(j.created+int64(j.delay)*int64(time.Second)-now, 0), now)
	r.Kind = wire.Inserted
	r.ID = j.id
}

// visible returns job id unless it is unknown or pending.
func (e *Engine) visible(id uint64) *job {
	if j := e.jobs.get(id); j != nil && j.state != statePending {
		return j
	}
	return nil
}

// putLocked adds a new job to t.
func (e *Engine) putLocked(t *tube, j *job, now int64) {
	j.id = e.nextID
	e.nextID++
	j.created = now
	j.tube = t
	e.refLocked(t)
	e.jobs.add(j)
	e.traceAttachLocked(j)
	t.totalJobs++
	e.st.totalJobs++
	if e.obs != nil {
		e.obs.JobPut(t.name)
	}
	e.enqueueLocked(j, int64(j.delay)*int64(time.Second), now)
}

// timeless marks the commands that do not need the time: Exec skips the
// clock for them, a measurable saving on delete.
var timeless = func() (t [numVerbs]bool) {
	for _, v := range []wire.Verb{wire.Use, wire.Watch, wire.Ignore, wire.Delete, wire.Bury,
		wire.Peek, wire.PeekReady, wire.PeekDelayed, wire.PeekBuried,
		wire.ListTubes, wire.ListTubeUsed, wire.ListTubesWatched} {
		t[v] = true
	}
	return t
}()

// execLocked runs every command but put, reserve and quit. now is -1 for
// the timeless ones. With a journal, it returns the Ticket of the change's
// last record, to wait for before the reply goes out; otherwise nil.
func (s *Session) execLocked(cmd *wire.Command, r *wire.Reply, now int64) Ticket {
	e := s.e
	switch cmd.Verb {
	case wire.Use:
		t := e.tubeLocked(cmd.Tube)
		if t != s.use {
			e.refLocked(t)
			t.using++
			s.use.using--
			e.unrefLocked(s.use)
			s.use = t
		}
		r.Kind, r.Tube = wire.Using, t.nameB
	case wire.Watch:
		t := e.tubeLocked(cmd.Tube)
		if !s.watches(t) {
			e.refLocked(t)
			t.watching++
			s.watch = append(s.watch, t)
		}
		r.Kind, r.Count = wire.Watching, uint64(len(s.watch))
	case wire.Ignore:
		s.ignoreLocked(cmd.Tube, r)
	case wire.ReserveJob:
		return s.reserveJobLocked(cmd.ID, r, now)
	case wire.Delete:
		r.Kind = wire.NotFound
		if j := e.visible(cmd.ID); j != nil && (j.state != stateReserved || s.reserved.contains(j)) {
			s.deleteLocked(j)
			r.Kind = wire.Deleted
			if e.jr != nil {
				return e.journalDelete(cmd.ID)
			}
		}
	case wire.Release:
		r.Kind = wire.NotFound
		if j := e.visible(cmd.ID); j != nil && s.owns(j) {
			s.releaseLocked(j, cmd.Pri, cmd.Delay, now)
			r.Kind = wire.Released
			if e.jr != nil {
				return e.journalUpdate(j)
			}
		}
	case wire.Bury:
		r.Kind = wire.NotFound
		if j := e.visible(cmd.ID); j != nil && s.owns(j) {
			s.buryLocked(j, cmd.Pri)
			r.Kind = wire.Buried
			if e.jr != nil {
				return e.journalUpdate(j)
			}
		}
	case wire.Touch:
		r.Kind = wire.NotFound
		if j := e.visible(cmd.ID); j != nil && s.owns(j) {
			j.deadline = now + int64(j.ttr)*int64(time.Second)
			s.reserved.fix(j)
			s.retimeLocked()
			r.Kind = wire.Touched
		}
	case wire.Peek:
		s.found(e.visible(cmd.ID), r)
	case wire.PeekReady:
		s.found(s.use.ready.top(), r)
	case wire.PeekDelayed:
		s.found(s.use.delay.top(), r)
	case wire.PeekBuried:
		s.found(s.use.buried.top(), r)
	case wire.Kick:
		n, t := e.kickLocked(s.use, cmd.Bound, now)
		r.Kind, r.Count = wire.KickedCount, uint64(n)
		return t
	case wire.KickJob:
		r.Kind = wire.NotFound
		if j := e.visible(cmd.ID); j != nil && (j.state == stateBuried || j.state == stateDelayed) {
			r.Kind = wire.Kicked
			return e.kickJobLocked(j, now)
		}
	case wire.StatsJob:
		if j := e.visible(cmd.ID); j != nil {
			s.buf = e.appendJobStats(s.buf[:0], j, now)
			r.Kind, r.Body = wire.OK, s.buf
		} else {
			r.Kind = wire.NotFound
		}
	case wire.StatsTube:
		if t := e.tubes[string(cmd.Tube)]; t != nil {
			s.buf = e.appendTubeStats(s.buf[:0], t, now)
			r.Kind, r.Body = wire.OK, s.buf
		} else {
			r.Kind = wire.NotFound
		}
	case wire.Stats:
		s.buf = e.appendStats(s.buf[:0], now)
		r.Kind, r.Body = wire.OK, s.buf
	case wire.ListTubes:
		s.buf = appendTubeList(s.buf[:0], e.tubeList)
		r.Kind, r.Body = wire.OK, s.buf
	case wire.ListTubeUsed:
		r.Kind, r.Tube = wire.Using, s.use.nameB
	case wire.ListTubesWatched:
		s.buf = appendTubeList(s.buf[:0], s.watch)
		r.Kind, r.Body = wire.OK, s.buf
	case wire.PauseTube:
		r.Kind = wire.NotFound
		if t := e.tubes[string(cmd.Tube)]; t != nil {
			e.pauseLocked(t, cmd.Delay, now)
			r.Kind = wire.Paused
		}
	default:
		r.Kind = wire.UnknownCommand
	}
	return nil
}

// owns reports whether j is reserved by this session.
func (s *Session) owns(j *job) bool {
	return j.state == stateReserved && s.reserved.contains(j)
}

func (s *Session) watches(t *tube) bool {
	for _, w := range s.watch {
		if w == t {
			return true
		}
	}
	return false
}

// ignoreLocked drops a tube from the watch list. Ignoring a tube not
// watched is not an error (beanstalkd answers WATCHING n); ignoring the
// only watched tube is NOT_IGNORED. The last entry moves into the hole,
// which is beanstalkd's list-tubes-watched order.
func (s *Session) ignoreLocked(name []byte, r *wire.Reply) {
	for i, t := range s.watch {
		if t.name != string(name) {
			continue
		}
		if len(s.watch) < 2 {
			r.Kind = wire.NotIgnored
			return
		}
		last := len(s.watch) - 1
		s.watch[i] = s.watch[last]
		s.watch[last] = nil
		s.watch = s.watch[:last]
		t.watching--
		s.e.unrefLocked(t)
		break
	}
	r.Kind, r.Count = wire.Watching, uint64(len(s.watch))
}

func (s *Session) found(j *job, r *wire.Reply) {
	if j == nil {
		r.Kind = wire.NotFound
		return
	}
	r.Kind, r.ID, r.Body = wire.Found, j.id, j.body
}

func (s *Session) deleteLocked(j *job) {
	if j.state == stateReserved {
		if o := s.e.obs; o != nil {
			// delete is timeless: read the clock only for the observer.
			o.JobDeleted(j.tube.name, runTime(j, s.e.now()))
		}
		s.unreserveLocked(j)
	} else {
		s.e.detachLocked(j)
	}
	j.tube.deletes++
	s.e.freeLocked(j)
}

func (s *Session) releaseLocked(j *job, pri, delay uint32, now int64) {
	s.unreserveLocked(j)
	j.pri = pri
	j.delay = delay
	j.releases++
	s.e.enqueueLocked(j, int64(delay)*int64(time.Second), now)
}

func (s *Session) buryLocked(j *job, pri uint32) {
	if o := s.e.obs; o != nil {
		o.JobBuried(j.tube.name, runTime(j, s.e.now()))
	}
	s.unreserveLocked(j)
	j.pri = pri
	s.e.buryLocked(j)
}

// kickLocked moves up to bound jobs of t to ready: buried ones if there are
// any, else delayed ones, soonest first. With a journal it returns the
// Ticket of the last kicked job's record, which completes after the others.
func (e *Engine) kickLocked(t *tube, bound uint32, now int64) (uint32, Ticket) {
	from := &t.buried
	if from.len() == 0 {
		from = &t.delay
	}
	var n uint32
	var last Ticket
	for ; n < bound && from.len() > 0; n++ {
		last = e.kickJobLocked(from.top(), now)
	}
	return n, last
}

// kickJobLocked makes a buried or delayed job ready, and journals it.
func (e *Engine) kickJobLocked(j *job, now int64) Ticket {
	e.detachLocked(j)
	j.kicks++
	e.enqueueLocked(j, 0, now)
	if e.jr == nil {
		return nil
	}
	return e.journalUpdate(j)
}

// pauseLocked stops reserves from t for delay seconds. beanstalkd pauses
// for at least a nanosecond even when asked for 0, which in effect ends
// any pause at once; so does this.
func (e *Engine) pauseLocked(t *tube, delay uint32, now int64) {
	t.pauses++
	if delay == 0 {
		e.unpauseLocked(t, now)
		return
	}
	t.paused = true
	t.pause = int64(delay) * int64(time.Second)
	t.unpauseAt = now + t.pause
	e.retimeTubeLocked(t)
}
