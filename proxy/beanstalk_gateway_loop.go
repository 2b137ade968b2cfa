package proxy

import (
	"bytes"
	"errors"
	"fmt"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/proxy/auth"
	"github.com/jobgate/jobgate/routing"
)

// A Beanstalk gateway connection served by the event loop
// (beanstalk_gateway_loop_linux.go) talks to plain-TCP upstream servers
// through sessions served by the same loop (routing.BeanstalkLoopConn),
// as the Gearman gateway does (gearman_gateway_loop.go): the loop reads a
// client's commands, sends each to its backend, reads the backends'
// replies and writes the client in request order, with no goroutine
// hand-off in between.
//
// The loop serves the simple commands (loopCan): use, watch, ignore,
// list-tube-used, list-tubes-watched, put, the commands naming a job, and
// a reserve whose watch list lives on one upstream, when every backend the
// command reaches already has an open loop session. Anything else (the
// first command to a backend, which dials; a reserve over several
// backends; stats, list-tubes, kick, peek-ready...; the local engine; auth
// checks, which may ask a backend and wait) is handled off the loop, by
// the goroutine code of the session (exec): the loop stops watching the
// connection, a goroutine writes what output the loop held, runs the
// command (its blocking waits are filled by the loop, which goes on
// serving the upstream sessions) and gives the connection back; the loop
// then serves the commands buffered behind it. While a goroutine has it,
// the connection's replies go straight to its socket, and the goroutine
// may read ahead (a reserve noticing a hang-up); the loop takes those
// bytes first when it resumes.
//
// A gateway whose id map decodes an upstream the loop cannot serve (TLS)
// keeps a goroutine per connection (loopable).

// errBgwNotOpen: the event loop needs a backend session that is not open,
// and must not dial.
var errBgwNotOpen = errors.New("beanstalk gateway: backend session not open on the loop")

// loopable reports whether the event loop can serve every upstream of rt,
// routed to or not: an id held from before a reload, or forged, opens a
// session on the backend it names.
func (rt *bgwRouting) loopable() bool {
	ok := true
	rt.cfg.IDs.Each(func(b *routing.Backend) {
		if b.Beanstalk != nil && !b.CanLoopBeanstalk() {
			ok = false
		}
	})
	for _, b := range rt.routed {
		if b.Beanstalk != nil && !b.CanLoopBeanstalk() {
			ok = false
		}
	}
	return ok
}

// onLoop reports whether the loop goroutine is running this session's
// command, which must then never block.
func (s *bgwSession) onLoop() bool { return s.lc != nil && !s.lc.off }

// openLoop opens be's session as an event-loop session attached to the
// connection's loop; called off the loop (it dials).
func (s *bgwSession) openLoop(be *bgwBackend) error {
	b := be.b
	if !b.CanLoopBeanstalk() {
		return fmt.Errorf("%w: %s cannot be served on the event loop", routing.ErrUnavailable, b.Name)
	}
	ctx, cancel := s.gw.openTimeout()
	defer cancel()
	conn, err := b.OpenBeanstalkLoop(ctx, func(error) { be.dead.Store(true) })
	if err != nil {
		return err
	}
	be.conn, be.loop = conn, conn
	s.lc.attach(conn)
	return nil
}

// loopOpen reports whether b has an open, live event-loop session.
func (s *bgwSession) loopOpen(b *routing.Backend) bool {
	if b.Beanstalk == nil {
		return false // the local engine: handled off the loop
	}
	for _, be := range s.open {
		if be.b == b {
			return be.loop != nil && !be.dead.Load()
		}
	}
	return false
}

// loopCan reports whether the loop can run cmd in s.rt without blocking:
// a simple command whose backends all have open loop sessions.
func (s *bgwSession) loopCan(cmd *wire.Command) bool {
	if s.c.auth != nil || s.c.srv.auth.Load() != nil || auth.IsReservedTube(cmd.Tube) {
		return false // authorize may ask a backend and wait
	}
	switch cmd.Verb {
	case wire.ListTubeUsed, wire.ListTubesWatched, wire.Ignore:
		return true
	case wire.Use:
		return s.producerOpen(cmd.Tube)
	case wire.Put:
		return s.gw.draining() || s.producerOpen(s.used)
	case wire.Watch:
		if !s.consumable(cmd.Tube) {
			return true
		}
		if p := s.rt.cfg.Rules.Match(cmd.Tube); p != nil {
			for _, b := range p.Backends() {
				if b.Available() && serves(b) && !s.loopOpen(b) {
					return false
				}
			}
		}
		return true
	case wire.ReserveJob:
		if s.c.srv.guard.current().MaxReservedPerConn > 0 {
			return false // exec settles first
		}
		return s.idOpen(cmd.ID)
	case wire.Delete, wire.Release, wire.Bury, wire.Touch, wire.Peek, wire.KickJob, wire.StatsJob:
		return s.idOpen(cmd.ID)
	case wire.Reserve, wire.ReserveWithTimeout:
		if s.overReserved(cmd.Verb) {
			return true
		}
		b := s.reserveOne()
		return b != nil && s.loopOpen(b)
	}
	return false
}

// idOpen reports whether the backend a job id names is no backend (the
// command answers NOT_FOUND) or has an open loop session.
func (s *bgwSession) idOpen(id uint64) bool {
	b, _ := s.rt.cfg.IDs.Decode(id)
	return !serves(b) || s.loopOpen(b)
}

// producerOpen reports whether the backend a put to tube would go to has
// an open loop session, or there is none (INTERNAL_ERROR, no dial).
func (s *bgwSession) producerOpen(tube []byte) bool {
	var stack [8]*routing.Backend
	var order []*routing.Backend
	if bytes.Equal(tube, s.used) {
		order = s.producers() // the put's case: cached per used tube
	} else if p := s.rt.cfg.Rules.Match(tube); p != nil {
		order = p.Order(tube, stack[:0])
	}
	for _, b := range order {
		if b.Available() {
			return s.loopOpen(b)
		}
	}
	return true
}

// reserveOne returns the one backend a reserve would target
// (reserveTargets) when there is exactly one, else nil.
func (s *bgwSession) reserveOne() *routing.Backend {
	var one *routing.Backend
	for _, b := range s.reserveBackends() {
		if !b.Available() {
			continue
		}
		if one != nil {
			return nil // each backend is listed once
		}
		one = b
	}
	return one
}

// execLoop runs cmd on the loop; loopCan said it may.
func (s *bgwSession) execLoop(cmd *wire.Command) error {
	if (cmd.Verb == wire.Reserve || cmd.Verb == wire.ReserveWithTimeout) && !s.overReserved(cmd.Verb) {
		s.countCommand(cmd.Verb)
		if s.gw.trace != nil {
			s.cmdStart = s.gw.trace.tr.Now() // as execIn stamps: the receive span's start
		}
		s.reserveLoop(cmd)
		return nil
	}
	return s.execIn(cmd)
}

// reserveLoop forwards a reserve to the one upstream the watch list lives
// on; its reply takes its turn in request order like any other. While it
// waits the connection is busy for the idle timeout.
func (s *bgwSession) reserveLoop(cmd *wire.Command) {
	be, err := s.backend(s.reserveOne())
	if err != nil {
		s.answer(cmd.Verb, internalError)
		return
	}
	s.syncWatchCached(be)
	sl := s.push(be, cmd.Verb)
	sl.wait = true
	s.setWaiting(true)
	s.do(be, cmd, sl)
	if s.lc.eof {
		be.conn.Cancel() // the client half-closed: TIMED_OUT, as from beanstalkd
	}
}

// settleDone is settle for the loop: it sends what is queued for the
// backends and writes the replies owed whose turn has come and that have
// arrived, without waiting for the others.
func (s *bgwSession) settleDone() error {
	s.flushBackends()
	// The filled head of fifo, under one lock: a slot once done stays
	// done and is the loop's.
	k := 0
	s.mu.Lock()
	for k < len(s.fifo) && s.fifo[k].done {
		k++
	}
	s.mu.Unlock()
	var err error
	i := 0
	for ; i < k; i++ {
		sl := s.fifo[i]
		if sl.wait {
			s.setWaiting(false)
		}
		if err == nil {
			err = s.writeSlot(sl)
		}
		s.recycle(sl)
		s.fifo[i] = nil
	}
	if i > 0 {
		n := copy(s.fifo, s.fifo[i:])
		clear(s.fifo[n:])
		s.fifo = s.fifo[:n]
	}
	return err
}

// cancelWaits ends the reserves forwarded by the loop that are still
// waiting: the client hung up, and gets TIMED_OUT for them, as from
// beanstalkd.
func (s *bgwSession) cancelWaits() {
	for _, sl := range s.fifo {
		if !sl.wait || sl.be == nil {
			continue
		}
		s.mu.Lock()
		done := sl.done
		s.mu.Unlock()
		if !done {
			sl.be.conn.Cancel()
		}
	}
}

// giveBackAsync is giveBack on the loop, which cannot wait: stats-job for
// the job's priority, then, when it answers, release with it.
func (s *bgwSession) giveBackAsync(be *bgwBackend, id uint64) {
	be.dirty = true
	be.conn.Do(&wire.Command{Verb: wire.StatsJob, ID: id}, func(r *wire.Reply, err error) {
		var st wire.JobStats
		if err != nil || r.Kind != wire.OK || st.ParseYAML(r.Body) != nil {
			return // not ours any more, or its TTR will return it
		}
		be.conn.Do(&wire.Command{Verb: wire.Release, ID: id, Pri: st.Pri}, s.discard)
		_ = be.conn.Flush()
	})
	s.flushBackends()
}

// gatewayLooping reports whether the gateway's event loop has started: its
// connections cannot use an upstream the loop cannot serve.
func (s *BeanstalkServer) gatewayLooping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw.loop != nil
}
