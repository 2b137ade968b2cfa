package proxy

import (
	"errors"
	"io"
	"net"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/proxy/connlimit"
	"github.com/jobgate/jobgate/routing"
)

// serveGateway is serve for a gateway connection: commands go through a
// bgwSession instead of one engine session.
func (c *beanstalkConn) serveGateway() {
	s := c.srv.gw.newSession(c)
	defer s.close()
	// The same limits as the direct path (limits_beanstalk.go): the
	// timeouts, with the session's pending reserve and reservations as
	// its work in hand, and the write timeout's writer.
	c.srv.guard.watch(&c.watch, s.busy, func(connlimit.Reason) { c.nc.Close() })
	defer c.srv.guard.unwatch(&c.watch)
	wr := wire.NewWriter(beanstalkOut{c})
	s.wr = wr
	c.in.wr = wr
	rd := wire.NewReader(&bgwInput{s: s, in: &c.in}, c.srv.limits)
	c.in.rd = rd
	for {
		cmd, err := rd.ReadCommand()
		if err == nil {
			c.watch.frames.Add(1)
		}
		if err != nil {
			var ce *wire.ClientError
			if !errors.As(err, &ce) {
				if err != io.EOF && !errors.Is(err, net.ErrClosed) {
					c.srv.log.Debug("beanstalk read", "remote", c.nc.RemoteAddr().String(), "err", err)
				}
				if s.settle() == nil {
					wr.Flush()
				}
				return
			}
			var verb wire.Verb
			if ce.Kind == wire.JobTooBig || ce.Kind == wire.ExpectedCRLF {
				verb = wire.Put
				s.countRejectedPut(ce.Kind)
				if t := s.gw.trace; t != nil {
					t.refused(s.used, 0, ce.Kind.String())
				}
			}
			s.answer(verb, wire.Reply{Kind: ce.Kind})
			continue
		}
		if cmd.Verb == wire.Quit {
			if s.settle() == nil {
				wr.Flush()
			}
			return
		}
		if s.exec(cmd) != nil {
			return
		}
	}
}

// bgwInput is the gateway connection's input: before it blocks on the
// client for more bytes, it settles the replies owed (sending the batch to
// the backends and writing the answers), and beanstalkInput then flushes
// them. So replies go out once per batch of pipelined commands, and a
// client that waits for them before sending more is not kept waiting.
type bgwInput struct {
	s  *bgwSession
	in *beanstalkInput
}

func (i *bgwInput) Read(p []byte) (int, error) {
	if len(i.in.ahead) == 0 {
		if err := i.s.settle(); err != nil {
			return 0, err
		}
	}
	return i.in.Read(p)
}

// reserve serves a reserve from every backend of every watched tube's pool
// (DESIGN decision 5). It first asks each in turn for a job that is ready
// now (reserve-with-timeout 0, starting one further each time so that no
// backend is starved), which takes no job it does not hand out; only when
// none has one does it race a waiting reserve over all of them: the first
// job wins, the other waits are cancelled, and a job a loser got anyway
// goes back to ready.
func (s *bgwSession) reserve(cmd *wire.Command) error {
	targets := s.reserveTargets()
	if len(targets) == 0 {
		return s.write(cmd.Verb, &internalError)
	}
	// A ready job is taken with a plain request and reply, which the read
	// loop waits for without watching the client; only a reserve that has
	// to wait needs the race below. (The local engine alone answers a
	// ready job at once either way.)
	if len(targets) > 1 || targets[0].b.Beanstalk != nil {
		done, err := s.reserveReady(cmd, targets)
		if done {
			return err
		}
	}
	slots := make([]*bgwSlot, len(targets))
	s.setWaiting(true)
	defer s.setWaiting(false)
	s.mu.Lock()
	s.raceLeft, s.raceWin, s.raceAwake = len(targets), nil, true
	s.mu.Unlock()
	for i, be := range targets {
		sl := s.slot(be, cmd.Verb)
		sl.race = true
		slots[i] = sl
		s.do(be, cmd, sl)
	}
	s.flushBackends()
	gone := s.wr.Flush()
	if gone == nil {
		gone = s.awaitRace()
	}
	for i, be := range targets {
		s.mu.Lock()
		done := slots[i].done
		s.mu.Unlock()
		if !done {
			s.abandonWait(be)
		}
	}
	s.mu.Lock()
	for s.raceLeft > 0 {
		s.cond.Wait()
	}
	win := s.raceWin
	s.raceAwake, s.raceWin = false, nil
	s.mu.Unlock()
	// No poke can come any more: clear the last one.
	s.c.nc.SetReadDeadline(time.Time{})
	select {
	case <-s.c.wake:
	default:
	}
	if gone != nil {
		win = nil
	}
	timedOut := false
	for _, sl := range slots {
		switch {
		case sl == win:
		case sl.err == nil && sl.reply.Kind == wire.Reserved:
			s.giveBack(sl.be, sl.reply.ID)
		case sl.err != nil:
			s.giveBackTooBig(sl)
		}
		timedOut = timedOut || sl.ok(wire.TimedOut)
	}
	var err error
	switch {
	case gone != nil && gone != io.EOF:
		err = gone
	case win != nil:
		err = s.writeSlot(win)
	case timedOut || gone == io.EOF:
		// A client that half-closed gets TIMED_OUT, as from beanstalkd.
		err = s.write(cmd.Verb, &wire.Reply{Kind: wire.TimedOut})
	default:
		err = s.write(cmd.Verb, &internalError)
	}
	for _, sl := range slots {
		s.recycle(sl)
	}
	return err
}

// abandonWait ends a losing reserve wait on be. beanstalkd cannot cancel a
// waiting reserve: Cancel lets the upstream's round run out and gives back
// a job the round brings, and that job then counts a reserve and a release
// it never had (Laravel, for one, counts a job's attempts by its reserves,
// and fails a job it thinks was tried too often). When the client holds no
// job on be, closing the session ends the wait with no job touched; the
// next command that needs be opens a new session. Otherwise closing would
// return the client's jobs, so the round runs out. (The close leaves no
// socket in TIME_WAIT per race: beanstalkd answers the wait TIMED_OUT as
// it sees the close, and the kernel resets the connection.)
func (s *bgwSession) abandonWait(be *bgwBackend) {
	if be.b.Beanstalk == nil || s.holdsOn(be.b) {
		be.conn.Cancel() // the local engine's Cancel takes no job
		return
	}
	be.dead.Store(true)
	be.conn.Close()
}

// holdsOn reports whether the client holds a job reserved on b.
func (s *bgwSession) holdsOn(b *routing.Backend) bool {
	for _, rb := range s.reserved {
		if rb == b {
			return true
		}
	}
	return false
}

// reserveReady asks each target in turn for a job ready now. It reports
// whether it answered the client: with the job, or, for a reserve that
// may not wait, TIMED_OUT (INTERNAL_ERROR when no backend answered).
func (s *bgwSession) reserveReady(cmd *wire.Command, targets []*bgwBackend) (bool, error) {
	start := s.nextReserve % len(targets)
	s.nextReserve++
	now := wire.Command{Verb: wire.ReserveWithTimeout}
	answered := false
	for i := range targets {
		sl := s.ask(targets[(start+i)%len(targets)], &now)
		s.flushBackends()
		s.wait(sl)
		sl.verb = cmd.Verb
		if sl.err == nil && (sl.reply.Kind == wire.Reserved || sl.reply.Kind == wire.DeadlineSoon) {
			err := s.writeSlot(sl)
			s.recycle(sl)
			return true, err
		}
		s.giveBackTooBig(sl)
		answered = answered || sl.err == nil
		s.recycle(sl)
	}
	if cmd.Verb == wire.ReserveWithTimeout && cmd.Timeout == 0 {
		if !answered {
			return true, s.write(cmd.Verb, &internalError)
		}
		return true, s.write(cmd.Verb, &wire.Reply{Kind: wire.TimedOut})
	}
	return false, nil
}

// reserveTargets opens a session on every available backend of every
// consumable watched tube's pool and makes each watch the tubes it serves.
func (s *bgwSession) reserveTargets() []*bgwBackend {
	var bs []*routing.Backend
	for _, t := range s.watched {
		if !s.consumable(t) {
			continue // auth: never reserve from it (beanstalk_gateway_auth.go)
		}
		p := s.rt.cfg.Rules.Match(t)
		if p == nil {
			continue
		}
	next:
		for _, b := range p.Backends() {
			for _, x := range bs {
				if x == b {
					continue next
				}
			}
			if serves(b) {
				bs = append(bs, b)
			}
		}
	}
	var out []*bgwBackend
	for _, b := range bs {
		if !b.Available() {
			continue
		}
		be, err := s.backend(b)
		if err != nil {
			continue
		}
		s.syncWatch(be, nil)
		out = append(out, be)
	}
	return out
}

// awaitRace waits until a reserve wait has a job or all have answered,
// reading ahead meanwhile to notice the client closing its side, as
// beanstalkConn.await does. It returns nil, or the client's read error
// (io.EOF for a half-close).
func (s *bgwSession) awaitRace() error {
	c := s.c
	in := &c.in
	if len(in.ahead) == 0 {
		if in.aheadBuf == nil {
			in.aheadBuf = make([]byte, 0, 4096)
		}
		in.ahead = in.aheadBuf[:0]
	}
	for {
		// Clear the deadline before looking, so a poke after the look
		// ends the next read.
		c.nc.SetReadDeadline(time.Time{})
		select {
		case <-c.wake:
		default:
		}
		s.mu.Lock()
		decided := s.raceWin != nil || s.raceLeft == 0
		s.mu.Unlock()
		if decided {
			return nil
		}
		if len(in.ahead) >= maxReadAhead {
			select {
			case <-c.wake:
				continue
			case <-c.srv.quit:
				return net.ErrClosed
			}
		}
		if cap(in.ahead)-len(in.ahead) < 512 {
			buf := make([]byte, len(in.ahead), 2*cap(in.ahead)+4096)
			copy(buf, in.ahead)
			in.ahead, in.aheadBuf = buf, buf
		}
		n, err := c.nc.Read(in.ahead[len(in.ahead):cap(in.ahead)])
		in.ahead = in.ahead[:len(in.ahead)+n]
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		return err
	}
}
