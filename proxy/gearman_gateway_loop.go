package proxy

import (
	"errors"
	"fmt"
	"sync"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/routing"
)

// A gateway connection served by the event loop (gearman_loop_linux.go)
// talks to plain-TCP upstream servers through sessions served by the same
// loop (routing.GearmanLoopConn): the loop reads an upstream's reply,
// delivers it to the session, and writes the client in the same batch,
// with no reader goroutine, goroutine hand-off or eventfd kick in between.
//
// Dialling blocks, so the loop never dials. A request that needs an
// upstream session not open yet (needsOpen) is handled off the loop: the
// connection stops being read (its socket leaves the poller), a goroutine
// opens the sessions and handles the request, and the loop resumes the
// connection (gearmanLoop.resume) with the frames still buffered. A
// GRAB_JOB moving on, after a NO_JOB, to a backend whose session is gone
// continues on a goroutine likewise (grabOffLoop).
//
// Backpressure: a client whose upstream sessions have more than half the
// write buffer limit waiting for the backend is not read until they are
// under a quarter (backlogged, gearmanLoop.throttle), as a goroutine
// connection blocks on its write; the limit itself fails a session only
// when one read's requests overshoot it.
//
// Locks: a loop session's own lock comes after gwBackend.sendMu (Send) and
// takes no other; gearmanLoop.mu comes after a gwSession.opening lock (attach).
// The loop calls a session's callbacks (deliver, lost) with no lock held.

// errNotOpen: a loop connection asked for a session that is not open, and
// it must not dial where it is.
var errNotOpen = errors.New("gearman gateway: backend session not open")

// errSuspended is what Handle returns for a request it handles off the
// loop: the loop stops reading the connection until resume.
var errSuspended = errors.New("gearman gateway: request handled off the loop")

// loopable reports whether every upstream backend of the gateway can be
// served by the event loop; if one cannot (TLS), the server serves its
// connections with goroutines, whose writes to it may block.
func (gw *gearmanGateway) loopable() bool { return gw.rt().loopable() }

// loopable reports whether the event loop can serve every upstream of rt:
// every one its handle map decodes, routed to or not, since a WORK_* or
// GET_STATUS with a handle on it (held from before a reload, or forged)
// opens a session there.
func (rt *gwRouting) loopable() bool {
	ok := true
	rt.cfg.Handles.Each(func(b *routing.Backend) {
		if b.ID != routing.LocalID && b.Gearman != nil && !b.CanLoop() {
			ok = false
		}
	})
	return ok
}

// notOpenLocked is why a loop connection has no session on b: the error
// its dial for the request being handled off the loop got, or errNotOpen.
func (s *gwSession) notOpenLocked(b *routing.Backend) error {
	if err := s.openErr[b]; err != nil {
		return err
	}
	return errNotOpen
}

// openConn opens the upstream session of bs: an event-loop session for a
// loop connection (attached to the loop once bs.conn is set), an ordinary
// one otherwise. A loop connection never gets an ordinary session, whose
// Send and Flush may block the loop: a backend the loop cannot serve (TLS;
// loopable keeps them away, this is the last guard) is unavailable to it.
func (s *gwSession) openConn(b *routing.Backend, bs *gwBackend) error {
	if s.c.loop != nil && !b.CanLoop() {
		return fmt.Errorf("%w: %s cannot be served on the event loop", routing.ErrUnavailable, b.Name)
	}
	ctx, cancel := s.gw.openTimeout()
	defer cancel()
	if l := s.c.loop; l != nil {
		conn, err := b.OpenGearmanLoop(ctx, routing.GearmanEvents{
			Packet: func(p *codec.Packet) { s.deliver(bs, p) },
			Closed: func(err error) { s.lost(bs, err); s.runActions() },
			Idle:   s.runActions, // the loop writes the client after its batch
		}, s.gw.srv.maxOutput) // read when output waits: SetLimits applies
		if err != nil {
			return err
		}
		bs.conn = conn
		l.attach(conn)
		return nil
	}
	conn, err := b.OpenGearman(ctx, routing.GearmanEvents{
		Packet: func(p *codec.Packet) { s.deliver(bs, p) },
		Closed: func(err error) { s.lost(bs, err); s.afterAsync() },
		Idle:   s.afterAsync,
	})
	if err != nil {
		return err
	}
	bs.conn = conn
	return nil
}

// needsOpen reports whether handling p would open an upstream session.
func (s *gwSession) needsOpen(p *codec.Packet) bool {
	need := false
	s.opens(p, func(*routing.Backend) bool { need = true; return true })
	return need
}

// opens calls f for each backend without an open session that handling p
// would open one on, in the order handling would, until f returns true.
// For a SUBMIT_* that is the first available backend of the function's
// pool, then, while f returns false (its dial failed), the next: unless one
// with an open session comes first.
func (s *gwSession) opens(p *codec.Packet, f func(b *routing.Backend) bool) {
	if p.Magic != codec.Req {
		return
	}
	rt := s.rt()
	var stack [8]*routing.Backend
	switch {
	case isSubmit(p.Type):
		fn := p.Function()
		pool := rt.cfg.Rules.Match(fn)
		if pool == nil || s.allOpen(pool.Backends()) {
			return // the usual case, decided without hashing or breakers
		}
		for _, b := range pool.Order(fn, stack[:0]) {
			if !b.Available() {
				continue
			}
			if s.wantsLine(p.Type, b) {
				// A line, not a session (gearman_gateway_bgline.go).
				if s.liveLine(b) != nil || f(b) {
					return
				}
				continue
			}
			if !s.unopened(b) || f(b) {
				return
			}
		}
	case p.Type == codec.GetStatus, p.Type == codec.WorkStatus, p.Type == codec.WorkComplete,
		p.Type == codec.WorkFail, p.Type == codec.WorkException, p.Type == codec.WorkData,
		p.Type == codec.WorkWarning:
		if b, _ := rt.cfg.Handles.Decode(p.Arg(0)); b != nil && s.unopened(b) {
			f(b)
		}
	case p.Type == codec.GetStatusUnique:
		s.eachUnopened(rt.routed, f)
	case p.Type == codec.CanDo, p.Type == codec.CanDoTimeout:
		if pool := rt.cfg.Rules.Match(p.Function()); pool != nil {
			s.eachUnopened(pool.Backends(), f)
		}
	case p.Type == codec.PreSleep, p.Type == codec.GrabJob, p.Type == codec.GrabJobUniq,
		p.Type == codec.GrabJobAll:
		s.mu.Lock()
		set := append(stack[:0], s.workerSet...)
		next := s.grabNext
		s.mu.Unlock()
		if p.Type != codec.PreSleep {
			// Only the first backend tryGrab tries (it skips unavailable
			// ones): it dials the next ones when it reaches them
			// (grabOffLoop), and not at all once a job is assigned.
			for i := range set {
				if b := set[(next+i)%len(set)]; b.Available() {
					set = append(set[:0], b)
					break
				}
			}
		}
		s.eachUnopened(set, f)
	}
}

// allOpen reports whether each of bs is local or has an open session.
func (s *gwSession) allOpen(bs []*routing.Backend) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bs {
		if b.ID != routing.LocalID && b.Gearman != nil && s.findLocked(b) == nil {
			return false
		}
	}
	return true
}

func (s *gwSession) eachUnopened(bs []*routing.Backend, f func(b *routing.Backend) bool) {
	for _, b := range bs {
		if s.unopened(b) && f(b) {
			return
		}
	}
}

// unopened reports whether b is an upstream without an open session.
func (s *gwSession) unopened(b *routing.Backend) bool {
	return b.ID != routing.LocalID && b.Gearman != nil && s.find(b) == nil
}

// handleOffLoop handles p on a goroutine of its own, after opening the
// sessions it needs, and then gives the connection back to the loop. The
// loop reads nothing more from the connection meanwhile, so requests stay
// in order.
//
// Its goroutine, like grabOffLoop's, counts in the server's wait group, so
// Shutdown waits for it (and cancels its dial). The loop goroutine, or
// another such goroutine, is counted while it starts one, so the count is
// never zero then.
func (s *gwSession) handleOffLoop(p *codec.Packet) error {
	cp := p.Clone()
	s.gw.srv.wg.Add(1)
	go func() {
		defer s.gw.srv.wg.Done()
		s.preopen(&cp)
		err := s.handle(&cp)
		s.runActions()
		s.mu.Lock()
		s.openErr = nil
		s.mu.Unlock()
		s.c.loop.resume(s.c, err)
	}()
	return errSuspended
}

// preopen dials the sessions handling p needs. A failure is kept in
// openErr, where session finds it while p is handled, so that the request
// fails (or fails over) as it would have after dialling itself. A
// SUBMIT_* dials its pool's backends in turn, until one opens; the other
// requests need all theirs, dialled at once, so that blackholed backends
// cost one dial timeout, not one each.
func (s *gwSession) preopen(p *codec.Packet) {
	if isSubmit(p.Type) {
		s.opens(p, func(b *routing.Backend) bool {
			if s.wantsLine(p.Type, b) {
				return s.preopenLine(b)
			}
			return s.preopenOne(b)
		})
		return
	}
	var all []*routing.Backend
	s.opens(p, func(b *routing.Backend) bool { all = append(all, b); return false })
	if len(all) == 1 {
		s.preopenOne(all[0])
		return
	}
	var wg sync.WaitGroup
	for _, b := range all {
		wg.Go(func() { s.preopenOne(b) })
	}
	wg.Wait()
}

// preopenOne dials b for preopen and reports whether it opened.
func (s *gwSession) preopenOne(b *routing.Backend) bool {
	s.waitLines()
	_, err := s.sessionDial(b, true)
	return s.preopened(b, err)
}

// preopenLine opens the loop's line to b for preopen and reports whether
// it opened.
func (s *gwSession) preopenLine(b *routing.Backend) bool {
	_, err := s.gw.lines.dial(s.gw, s.lineKey(b))
	return s.preopened(b, err)
}

// preopened keeps err, the failure of preopen's dial of b, for the request
// being handled; it reports whether there was none.
func (s *gwSession) preopened(b *routing.Backend, err error) bool {
	if err != nil {
		s.mu.Lock()
		if s.openErr == nil {
			s.openErr = map[*routing.Backend]error{}
		}
		s.openErr[b] = err
		s.mu.Unlock()
	}
	return err == nil
}

// grabOffLoop goes on with GRAB_JOB r on a goroutine, which may dial b,
// the backend it was about to try.
func (s *gwSession) grabOffLoop(r *gwReply, b *routing.Backend) {
	s.gw.srv.wg.Add(1)
	go func() {
		defer s.gw.srv.wg.Done()
		if _, err := s.sessionDial(b, true); err == nil {
			s.mu.Lock()
			r.grab.left = append([]*routing.Backend{b}, r.grab.left...)
			s.mu.Unlock()
		}
		s.tryGrab(r)
		s.afterAsync()
	}()
}

// backlogged reports whether one of the connection's event-loop sessions
// has more than limit bytes waiting for its backend to read them: the loop
// then stops reading the client (gearmanLoop.throttle), as a goroutine
// connection blocks on its write, rather than queue without end or fail
// the session at the write buffer limit.
func (s *gwSession) backlogged(limit int) bool {
	var stack [8]*gwBackend
	var lineStack [4]*gwLine
	s.mu.Lock()
	open := append(stack[:0], s.backends...)
	lines := append(lineStack[:0], s.lines...)
	s.mu.Unlock()
	for _, bs := range open {
		if lc, ok := bs.conn.(routing.GearmanLoopConn); ok && lc.Backlog() > limit {
			return true
		}
	}
	return linesBacklogged(lines, limit)
}
