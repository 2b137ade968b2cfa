package proxy

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/routing"
)

// bgwSession is one client connection of a Beanstalk gateway: the client's
// used tube and watch list, one backend session per backend it touched
// (opened lazily, DESIGN decision 2), and the replies it is owed.
//
// Request order (DESIGN decision 4): every command sent to a backend has a
// bgwSlot in fifo, in the client's order; backends answer their own
// commands in order and fill the slots from their goroutines; the read
// loop writes the slots in fifo order once they are filled (settle), which
// it does before it blocks for more input, so a pipelined batch goes out to
// every backend before the first reply is awaited. Commands that need
// several backends' answers (reserve, stats, peek-ready, ...) settle
// first and then run on the read loop.
//
// Goroutines: everything but the slots' done functions runs on the
// connection's read loop, which owns every field not marked otherwise.
// done functions run on backend goroutines (or inside Do for the local
// engine) and touch only what mu guards. mu is never held while calling
// into a backend.
type bgwSession struct {
	gw *beanstalkGateway
	rt *bgwRouting // the routing in force when the command began
	c  *beanstalkConn
	wr *wire.Writer
	lc *bgwLoopConn // set when the event loop serves the connection (beanstalk_gateway_loop.go)

	used    []byte   // the client's used tube
	watched [][]byte // the client's watch list, in beanstalkd's order
	open    []*bgwBackend
	fifo    []*bgwSlot
	free    []*bgwSlot
	order   []*routing.Backend // producers: the used tube's pool in hash order
	orderRT *bgwRouting        // the routing order was made in; nil: none
	wc      bgwWatchCache      // beanstalk_gateway_routecache.go
	// nextReserve rotates the backend a reserve asks first.
	nextReserve int
	yaml        wire.YAMLBuilder
	discard     func(*wire.Reply, error) // the done of commands of our own

	// Auth and limits (beanstalk_gateway_auth.go, _limits.go).
	allow     func(tube []byte) bool      // the reserve filter; nil: every tube
	tubeBuf   []byte                      // JobTube's answer
	reserved  map[uint64]*routing.Backend // client id -> backend of each job the client holds
	nReserved atomic.Int32                // len(reserved), for the sweeper
	waiting   atomic.Bool                 // a reserve is waiting on the backends (setWaiting)
	client    bgwClientState              // what stats counts of the client (beanstalk_gateway_clients.go)

	// Tracing (beanstalk_gateway_trace.go).
	cmdStart time.Time // when the command being routed was read
	wrap     []byte    // the payload envelope of the last RESERVED

	mu        sync.Mutex
	cond      sync.Cond // on mu: a slot was filled
	raceLeft  int       // guarded by mu: reserve waits not yet answered
	raceWin   *bgwSlot  // guarded by mu: the first reserve answer with a job
	raceAwake bool      // guarded by mu: the read loop wants race pokes
}

// bgwBackend is one backend session of a bgwSession.
type bgwBackend struct {
	b       *routing.Backend
	conn    routing.BeanstalkConn
	loop    routing.BeanstalkLoopConn // conn, when the event loop serves it
	used    string                    // the tube the backend session uses
	watched []string                  // the tubes it watches
	dirty   bool                      // sent since the last flush
	// syncGen and syncRT: the watch list generation and routing that
	// watched was last synced for (syncWatchCached).
	syncGen uint64
	syncRT  *bgwRouting
	// dead: the session ended. Set from backend goroutines and read per
	// command, hence atomic rather than under bgwSession.mu.
	dead atomic.Bool
}

// bgwSlot is one reply owed to the client (or to the gateway itself).
type bgwSlot struct {
	fn    func(*wire.Reply, error) // fills this slot; made once per slot
	done  bool                     // guarded by mu until set, then the read loop's
	err   error
	reply wire.Reply // Tube and Body point into buf
	buf   []byte
	be    *bgwBackend // the backend answering; nil for the gateway's own answer
	verb  wire.Verb   // the client's command
	id    uint64      // the client's job id, for id-routed commands
	race  bool        // a reserve wait
	wait  bool        // a reserve forwarded by the event loop (reserveLoop)
	// keep marks a gateway answer held until the backend commands sent
	// with it (syncUse, syncWatch) are answered, so that the client sees
	// its use or watch only once the backends have done it; need counts
	// those replies, plus one until release. Guarded by mu.
	keep bool
	need int
	// Tracing: the put's send span; when the command was read; the
	// release or bury's priority and delay.
	span       *bgwSpan
	start      time.Time
	pri, delay uint32
}

func (gw *beanstalkGateway) newSession(c *beanstalkConn) *bgwSession {
	s := &bgwSession{gw: gw, rt: gw.rt(), c: c, used: []byte("default"), watched: [][]byte{[]byte("default")}}
	s.wc.gen = 1
	s.cond.L = &s.mu
	s.discard = func(*wire.Reply, error) {}
	s.clientOpened()
	return s
}

// close ends every backend session: each backend returns the client's
// reservations to ready.
func (s *bgwSession) close() {
	s.clientClosed()
	s.forget(nil)
	for _, be := range s.open {
		be.conn.Close()
	}
	s.open = nil
}

// slot returns a fresh slot for a reply from be.
func (s *bgwSession) slot(be *bgwBackend, verb wire.Verb) *bgwSlot {
	var sl *bgwSlot
	if n := len(s.free); n > 0 {
		sl = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		sl = &bgwSlot{}
		sl.fn = func(r *wire.Reply, err error) { s.fill(sl, r, err) }
	}
	sl.done, sl.err, sl.reply, sl.be, sl.verb, sl.id, sl.race, sl.wait = false, nil, wire.Reply{}, be, verb, 0, false, false
	sl.keep, sl.need = false, 0
	sl.span, sl.start = nil, s.cmdStart
	return sl
}

// recycle makes sl available again; its done must have run.
func (s *bgwSession) recycle(sl *bgwSlot) {
	if cap(sl.buf) > 64<<10 {
		sl.buf = nil // do not keep a large job's body per connection
	}
	s.free = append(s.free, sl)
}

// fill is a slot's done: it copies the reply (valid only during done).
func (s *bgwSession) fill(sl *bgwSlot, r *wire.Reply, err error) {
	s.mu.Lock()
	if sl.keep {
		// A backend's part of a held answer: the answer stands whatever
		// it says (a failed backend shows on the next command to it).
		if sl.need--; sl.need == 0 {
			sl.done = true
			s.cond.Broadcast()
		}
		s.mu.Unlock()
		return
	}
	sl.err = err
	if r != nil {
		sl.reply = *r
		sl.buf = append(append(sl.buf[:0], r.Tube...), r.Body...)
		sl.reply.Tube = sl.buf[:len(r.Tube):len(r.Tube)]
		sl.reply.Body = sl.buf[len(r.Tube):]
	}
	if sl.be != nil && (routing.IsTransport(err) || errors.Is(err, routing.ErrClosed)) {
		sl.be.dead.Store(true)
	}
	sl.done = true
	if sl.race {
		s.raceLeft--
		if err == nil && s.raceWin == nil && (r.Kind == wire.Reserved || r.Kind == wire.DeadlineSoon) {
			s.raceWin = sl
		}
		if s.raceAwake {
			s.c.notify()
		}
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// wait blocks until sl is filled.
func (s *bgwSession) wait(sl *bgwSlot) {
	s.mu.Lock()
	for !sl.done {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// backend returns the open session to b, opening it (through b's breaker)
// if there is none or the last one failed.
func (s *bgwSession) backend(b *routing.Backend) (*bgwBackend, error) {
	for i, be := range s.open {
		if be.b != b {
			continue
		}
		if !be.dead.Load() {
			return be, nil
		}
		be.conn.Close()
		s.open = append(s.open[:i], s.open[i+1:]...)
		s.forget(b) // the backend returned them to ready
		break
	}
	if s.onLoop() {
		return nil, errBgwNotOpen // the loop never dials (loopCan)
	}
	be := &bgwBackend{b: b, used: "default", watched: []string{"default"}}
	if s.lc != nil && b.Beanstalk != nil {
		if err := s.openLoop(be); err != nil {
			return nil, err
		}
	} else if b.ID == routing.LocalID && b.Beanstalk == nil {
		be.conn, _ = bgwLocalBackend{s.gw.srv.eng}.Open(context.Background(), nil)
	} else {
		ctx, cancel := s.gw.openTimeout()
		conn, err := b.OpenBeanstalk(ctx, func(error) { be.dead.Store(true) })
		cancel()
		if err != nil {
			return nil, err
		}
		be.conn = conn
	}
	s.open = append(s.open, be)
	return be, nil
}

// do sends cmd to be with sl as its reply.
func (s *bgwSession) do(be *bgwBackend, cmd *wire.Command, sl *bgwSlot) {
	be.dirty = true
	be.conn.Do(cmd, sl.fn)
}

// own sends a command of the gateway's own whose reply does not matter.
func (s *bgwSession) own(be *bgwBackend, cmd *wire.Command) {
	be.dirty = true
	be.conn.Do(cmd, s.discard)
}

// flushBackends writes what was sent to each backend since the last flush:
// on the event loop, a loop session's with the loop's batch of writes at
// the end of the batch (deferFlush), others' at once.
func (s *bgwSession) flushBackends() {
	for _, be := range s.open {
		if be.dirty {
			be.dirty = false
			if be.loop == nil || !s.deferFlush(be.loop) {
				_ = be.conn.Flush() // a failure reaches the pending dones
			}
		}
	}
}

// hold makes sl, a gateway answer just queued, wait for the backend
// commands sent with it; release it once they are all sent.
func (sl *bgwSlot) hold() { sl.done, sl.keep, sl.need = false, true, 1 }

// release ends the sending for a held answer.
func (s *bgwSession) release(sl *bgwSlot) { s.fill(sl, nil, nil) }

// ownFor sends a command of the gateway's own whose reply holds sl (or
// does not matter, with sl nil).
func (s *bgwSession) ownFor(be *bgwBackend, cmd *wire.Command, sl *bgwSlot) {
	if sl == nil {
		s.own(be, cmd)
		return
	}
	s.mu.Lock()
	sl.need++
	s.mu.Unlock()
	s.do(be, cmd, sl)
}

// syncUse makes be use the client's tube; a use sent holds sl, if any.
func (s *bgwSession) syncUse(be *bgwBackend, sl *bgwSlot) {
	if be.used == string(s.used) {
		return
	}
	s.ownFor(be, &wire.Command{Verb: wire.Use, Tube: s.used}, sl)
	be.used = string(s.used)
}

// prepUse is syncUse for a command of the gateway's own that follows.
func (s *bgwSession) prepUse(be *bgwBackend) { s.syncUse(be, nil) }

// inPool reports whether b is a member of the pool of tube.
func (s *bgwSession) inPool(tube []byte, b *routing.Backend) bool {
	p := s.rt.cfg.Rules.Match(tube)
	if p == nil {
		return false
	}
	for _, m := range p.Backends() {
		if m == b {
			return true
		}
	}
	return false
}

// syncWatch makes be watch exactly the client's tubes that its backend
// serves and auth lets it consume: watches first, so the list never runs
// empty (a backend left watching one tube it may not consume is no
// reserve target, see reserveTargets). The commands sent
// hold sl, if any.
func (s *bgwSession) syncWatch(be *bgwBackend, sl *bgwSlot) {
	for _, t := range s.watched {
		if !s.inPool(t, be.b) || watching(be.watched, t) || !s.consumable(t) {
			continue
		}
		s.ownFor(be, &wire.Command{Verb: wire.Watch, Tube: t}, sl)
		be.watched = append(be.watched, string(t))
	}
	for i := 0; i < len(be.watched); {
		t := be.watched[i]
		keep := false
		for _, w := range s.watched {
			if string(w) == t && s.inPool(w, be.b) && s.consumable(w) {
				keep = true
				break
			}
		}
		if keep || len(be.watched) == 1 {
			i++
			continue
		}
		s.ownFor(be, &wire.Command{Verb: wire.Ignore, Tube: []byte(t)}, sl)
		be.watched = append(be.watched[:i], be.watched[i+1:]...)
	}
}

func watching(list []string, t []byte) bool {
	for _, w := range list {
		if w == string(t) {
			return true
		}
	}
	return false
}

// push queues a reply owed to the client from be.
func (s *bgwSession) push(be *bgwBackend, verb wire.Verb) *bgwSlot {
	sl := s.slot(be, verb)
	s.fifo = append(s.fifo, sl)
	return sl
}

// answer queues a reply the gateway gives itself.
func (s *bgwSession) answer(verb wire.Verb, r wire.Reply) *bgwSlot {
	sl := s.push(nil, verb)
	sl.fill(r)
	return sl
}

// fill sets a slot no other goroutine knows yet.
func (sl *bgwSlot) fill(r wire.Reply) {
	sl.buf = append(append(sl.buf[:0], r.Tube...), r.Body...)
	sl.reply = r
	sl.reply.Tube = sl.buf[:len(r.Tube):len(r.Tube)]
	sl.reply.Body = sl.buf[len(r.Tube):]
	sl.done = true
}

// settle sends what is queued for the backends and writes every reply
// owed, in order. The error is the client's connection failing.
func (s *bgwSession) settle() error {
	if len(s.fifo) == 0 {
		s.flushBackends()
		return nil
	}
	s.flushBackends()
	var err error
	for i, sl := range s.fifo {
		s.wait(sl)
		if err == nil {
			err = s.writeSlot(sl)
		}
		s.recycle(sl)
		s.fifo[i] = nil
	}
	s.fifo = s.fifo[:0]
	return err
}

var internalError = wire.Reply{Kind: wire.InternalError}

// writeSlot writes one filled slot as the client's reply, rewriting ids.
func (s *bgwSession) writeSlot(sl *bgwSlot) error {
	if sl.err != nil {
		s.giveBackTooBig(sl)
		if t := s.gw.trace; t != nil {
			t.reply(s, sl, wire.InternalError)
		}
		return s.write(sl.verb, &internalError)
	}
	r := &sl.reply
	if sl.verb == wire.ReserveJob && r.Kind == wire.Reserved {
		s.countWorker() // beanstalkd counts a reserve-job that reserved
	}
	if sl.be == nil {
		return s.write(sl.verb, r)
	}
	switch r.Kind {
	case wire.Inserted, wire.BuriedID, wire.Reserved, wire.Found:
		id, err := s.rt.cfg.IDs.Encode(sl.be.b, r.ID)
		if err != nil {
			if r.Kind == wire.Reserved {
				s.giveBack(sl.be, r.ID)
			}
			if t := s.gw.trace; t != nil {
				t.reply(s, sl, wire.InternalError)
			}
			return s.write(sl.verb, &internalError)
		}
		r.ID = id
	case wire.OK:
		if sl.verb == wire.StatsJob {
			r.Body = rewriteJobID(r.Body, sl.id)
		}
	}
	s.track(sl)
	if t := s.gw.trace; t != nil {
		t.reply(s, sl, 0)
	}
	return s.write(sl.verb, r)
}

// rewriteJobID replaces the id line of a stats-job body with the client's
// id, keeping the rest byte for byte.
func rewriteJobID(body []byte, id uint64) []byte {
	const key = "\nid: "
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return body
	}
	start := i + len(key)
	end := bytes.IndexByte(body[start:], '\n')
	if end < 0 {
		return body
	}
	end += start
	if string(body[start:end]) == strconv.FormatUint(id, 10) {
		return body
	}
	out := make([]byte, 0, len(body)+8)
	out = append(out, body[:start]...)
	out = strconv.AppendUint(out, id, 10)
	return append(out, body[end:]...)
}

// write writes one reply to the client and counts it.
func (s *bgwSession) write(verb wire.Verb, r *wire.Reply) error {
	if m := s.c.srv.metrics; m != nil {
		m.Commands.Beanstalk(verb, beanstalkResult(r.Kind))
	}
	if lc := s.lc; lc != nil && !lc.off && s.wr.Buffered() == 0 {
		// On the loop the Writer's output only lands in lc.out: append
		// there at once rather than copy it twice. An invalid kind
		// appends nothing and goes to the Writer for its error.
		n := len(lc.out)
		if lc.out = r.AppendTo(lc.out); len(lc.out) > n {
			return nil
		}
	}
	return s.wr.WriteReply(r)
}

// ask sends cmd to be for the gateway's own use (not in fifo); wait for
// the slot and recycle it.
func (s *bgwSession) ask(be *bgwBackend, cmd *wire.Command) *bgwSlot {
	sl := s.slot(be, cmd.Verb)
	s.do(be, cmd, sl)
	return sl
}

// giveBack returns a job the client will not get to ready, with its
// priority and no delay, as upstream.Beanstalk does for a cancelled
// reserve.
func (s *bgwSession) giveBack(be *bgwBackend, id uint64) {
	if s.onLoop() {
		s.giveBackAsync(be, id)
		return
	}
	sl := s.ask(be, &wire.Command{Verb: wire.StatsJob, ID: id})
	s.flushBackends()
	s.wait(sl)
	var st wire.JobStats
	ok := sl.err == nil && sl.reply.Kind == wire.OK && st.ParseYAML(sl.reply.Body) == nil
	s.recycle(sl)
	if !ok {
		return // not ours any more, or its TTR will return it
	}
	sl = s.ask(be, &wire.Command{Verb: wire.Release, ID: id, Pri: st.Pri})
	s.flushBackends()
	s.wait(sl)
	s.recycle(sl)
}

// giveBackTooBig returns a job whose RESERVED reply was too big to pass on
// (the backend session skipped the body and still holds the job).
func (s *bgwSession) giveBackTooBig(sl *bgwSlot) {
	var big *wire.ReplyTooBigError
	if sl.be != nil && errors.As(sl.err, &big) && big.Kind == wire.Reserved {
		s.giveBack(sl.be, big.ID)
	}
}
