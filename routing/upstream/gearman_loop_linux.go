//go:build linux

package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/routing"
)

var _ routing.GearmanLoopBackend = (*Gearman)(nil)

// CanLoop reports whether OpenLoop can serve this backend: plain TCP only
// (a TLS connection needs its own reads and writes, which may block).
func (g *Gearman) CanLoop() bool { return g.cfg.TLS == nil }

// OpenLoop connects, as Open does, and returns a session served by the
// caller's event loop (routing.GearmanLoopConn): its socket is taken out
// of the Go runtime's poller, so a reply costs no goroutine wakeup, only
// the loop's read. It blocks while dialling: call it off the loop.
func (g *Gearman) OpenLoop(ctx context.Context, ev routing.GearmanEvents, maxPending func() int) (routing.GearmanLoopConn, error) {
	if ev.Packet == nil {
		return nil, errors.New("upstream: gearman session without a packet callback")
	}
	fd, err := g.cfg.dialLoop(ctx)
	if err != nil {
		return nil, err
	}
	s := &gearmanLoopSession{cfg: &g.cfg, ev: ev, maxPending: maxPending, rfd: fd, loopSocket: loopSocket{fd: fd}}
	s.rd = gearman.NewReader(loopReader{s}, g.cfg.Limits)
	return s, nil
}

// gearmanLoopSession is one connection to gearmand served by an event
// loop. The loop goroutine owns rd, rfd, once and reported; the rest is
// guarded by mu, which Send, Flush and Close take from any goroutine.
// Only the loop closes the socket (end, Detach), so the descriptor never
// changes under a goroutine holding mu; others shut it down (fail), which
// makes it readable for the loop.
type gearmanLoopSession struct {
	cfg        *GearmanConfig
	ev         routing.GearmanEvents
	maxPending func() int // nil: no bound

	rd       *gearman.Reader // loop only
	rfd      int             // loop only: the socket, open until end or Detach
	once     epoll.Once      // loop only: rd's reads, one per readiness event
	rb       routing.IOBatch // loop only: the batch ReadInto queued the next read in, or nil
	rop      int             // loop only: that read's index
	reported bool            // loop only: the end was handled
	pkt      gearman.Packet  // loop only: the packet being delivered; a field, so it is not allocated per packet

	quiet atomic.Bool // Close was called: deliver and report nothing more

	mu          sync.Mutex
	loopSocket            // guarded by mu
	outstanding int       // requests sent whose reply has not come
	deadline    time.Time // when the replies outstanding are late; zero: not armed yet
	answered    bool      // a reply came since the last Expire
	err         error     // why the session ended, first cause only
}

// Send queues p; Flush writes it.
func (s *gearmanLoopSession) Send(p *gearman.Packet) error {
	if err := p.Validate(); err != nil {
		return err // the caller's mistake; nothing was queued
	}
	s.mu.Lock()
	err := s.sendLocked(p, nil)
	s.mu.Unlock()
	return err
}

// SendRaw is Send for a packet already encoded: raw must be p's wire
// bytes, such as gearman.Reader.LastPacket returns for a packet it decoded
// (so valid), which are copied rather than encoded again.
func (s *gearmanLoopSession) SendRaw(p *gearman.Packet, raw []byte) error {
	s.mu.Lock()
	err := s.sendLocked(p, raw)
	s.mu.Unlock()
	return err
}

// sendLocked queues p, or raw, its encoding, when not nil.
func (s *gearmanLoopSession) sendLocked(p *gearman.Packet, raw []byte) error {
	if s.err != nil {
		return s.err
	}
	if len(s.out) > 0 && s.maxPending != nil {
		if bound := s.maxPending(); bound > 0 && len(s.out) > bound {
			// Make room first: the socket may take what waits now.
			if err := s.writeLocked(); err != nil {
				return err
			}
			// The bound is on what waits before p, so that one request
			// larger than it (up to the packet size limit) still goes.
			if len(s.out) > bound {
				return s.failLocked("write", fmt.Errorf("%d bytes wait for the server to read them", len(s.out)))
			}
		}
	}
	if raw != nil {
		s.out = append(s.out, raw...)
	} else {
		s.out = gearman.AppendPacket(s.out, p.Magic, p.Type, p.Args...)
	}
	if p.Type < gearman.Type(len(expectsReply)) && expectsReply[p.Type] {
		s.outstanding++
		if s.outstanding == 1 {
			s.deadline = time.Time{} // Expire arms it
		}
	}
	return nil
}

// Flush writes what the socket takes now; the rest waits for EPOLLOUT.
func (s *gearmanLoopSession) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.wantOut {
		return nil // Ready writes when there is room
	}
	return s.writeLocked()
}

// writeLocked makes one non-blocking write of the queued output.
func (s *gearmanLoopSession) writeLocked() error {
	if len(s.out) == 0 {
		return nil
	}
	if err := s.writeOut(); err != nil {
		return s.failLocked("write", err)
	}
	return nil
}

// WriteInto queues the write of the waiting output in b.
func (s *gearmanLoopSession) WriteInto(b routing.IOBatch) bool {
	s.mu.Lock()
	ok := s.err == nil && s.takeOut(b)
	s.mu.Unlock()
	return ok
}

// Wrote takes the result of WriteInto's write.
func (s *gearmanLoopSession) Wrote() {
	s.mu.Lock()
	if err := s.wroteOut(); err != nil {
		s.failLocked("write", err)
	}
	s.mu.Unlock()
}

// ReadInto queues the next read in b, into the Reader's free room.
func (s *gearmanLoopSession) ReadInto(b routing.IOBatch) bool {
	if s.reported {
		return false
	}
	space := s.rd.Space()
	if len(space) == 0 {
		return false // full: read grows it
	}
	s.rb, s.rop = b, b.Read(s.rfd, space)
	return true
}

// Close ends the session quietly: the loop releases the socket when it
// sees it shut down.
func (s *gearmanLoopSession) Close() {
	s.quiet.Store(true)
	s.mu.Lock()
	if s.err == nil {
		s.err = routing.ErrClosed
	}
	s.shutdownLocked()
	s.mu.Unlock()
}

// failLocked ends the session for cause (the first cause wins) and returns
// the error it ended with. The loop reports it (Ready).
func (s *gearmanLoopSession) failLocked(op string, cause error) error {
	if s.err == nil {
		s.err = &routing.TransportError{Backend: s.cfg.Addr, Op: op, Err: cause}
	}
	s.shutdownLocked()
	return s.err
}

// shutdownLocked makes the socket readable for the loop (EOF, HUP) and
// tells the server the connection is over, without freeing the descriptor
// the loop may be using.
func (s *gearmanLoopSession) shutdownLocked() { s.loopSocket.shutdown() }

// Attach registers the socket with p. A session that already ended is
// registered too: its socket is shut down, so Ready reports the end at
// once. If p refuses it, the session fails and its end is reported here.
func (s *gearmanLoopSession) Attach(p routing.Poller, id int32) error {
	s.mu.Lock()
	err := s.attach(p, id)
	if err != nil {
		s.failLocked("attach", err)
	}
	s.mu.Unlock()
	if err != nil {
		s.end()
	}
	return err
}

// Ready handles the events the loop saw on the socket.
func (s *gearmanLoopSession) Ready(events uint32) bool {
	if s.reported {
		return false
	}
	if events&epoll.Out != 0 {
		s.mu.Lock()
		if s.err == nil {
			_ = s.writeLocked()
		}
		s.mu.Unlock()
	}
	if events&(epoll.In|epoll.Err) != 0 {
		s.read()
	}
	s.rb = nil
	s.mu.Lock()
	over := s.err != nil
	s.mu.Unlock()
	if over {
		s.end()
		return false
	}
	return true
}

// read reads the socket once, or takes what ReadInto's read brought, and
// delivers every whole packet, counting the replies off outstanding
// (replyCount).
func (s *gearmanLoopSession) read() {
	s.once.Arm()
	if s.rb != nil {
		if n := s.once.Took(s.rb.Result(s.rop)); n > 0 {
			s.rd.Filled(n)
		}
		s.rb = nil
	}
	delivered := false
	var replies replyCount
	defer s.answer(&replies)
	for {
		f, err := s.rd.ReadFrame()
		if err == epoll.ErrWouldBlock {
			break
		}
		if err != nil {
			s.fail("read", err)
			break
		}
		if f.Kind != gearman.KindPacket {
			s.fail("read", fmt.Errorf("unexpected text from server: %q", f.Text))
			break
		}
		s.pkt = f.Packet
		p := &s.pkt
		if p.Type < gearman.Type(len(isReply)) && isReply[p.Type] {
			s.countReply(&replies)
		}
		if s.quiet.Load() {
			return
		}
		s.ev.Packet(p)
		delivered = true
	}
	if delivered && s.ev.Idle != nil && !s.quiet.Load() {
		s.ev.Idle()
	}
}

// replyCount is what one read has counted off outstanding without
// taking the lock for each reply: taken of the avail requests that were
// outstanding when it last looked.
type replyCount struct {
	avail, taken int
	any          bool // a reply came
}

// countReply takes one reply off the requests outstanding, clamped at
// zero as in gearmanSession.readLoop: a reply that answers nothing (an
// ERROR for a WORK_*) must not take a request sent meanwhile from another
// goroutine off the count, or its deadline would never be armed. Only the
// loop takes requests off, and other goroutines only add, so those it saw
// stay outstanding until answer takes them: the lock is needed only when
// they are all answered.
func (s *gearmanLoopSession) countReply(rc *replyCount) {
	rc.any = true
	if rc.taken == rc.avail {
		s.mu.Lock()
		s.outstanding -= rc.taken
		rc.avail, rc.taken = s.outstanding, 0
		s.mu.Unlock()
	}
	if rc.taken < rc.avail {
		rc.taken++
	}
}

// answer takes what rc counted off outstanding and notes that replies
// came, for Expire.
func (s *gearmanLoopSession) answer(rc *replyCount) {
	if !rc.any {
		return
	}
	s.mu.Lock()
	s.outstanding = max(s.outstanding-rc.taken, 0)
	s.answered = true
	s.mu.Unlock()
}

func (s *gearmanLoopSession) fail(op string, cause error) {
	s.mu.Lock()
	s.failLocked(op, cause)
	s.mu.Unlock()
}

// end releases the socket and reports why the session ended, once, unless
// Close ended it.
func (s *gearmanLoopSession) end() {
	if s.reported {
		return
	}
	s.reported = true
	s.mu.Lock()
	s.releaseLocked()
	err := s.err
	s.mu.Unlock()
	if !s.quiet.Load() && s.ev.Closed != nil {
		s.ev.Closed(err)
	}
}

// releaseLocked removes the socket from the poller and closes it.
func (s *gearmanLoopSession) releaseLocked() { s.loopSocket.release() }

// Expire fails the session when a reply is overdue or output has waited
// for room for longer than the I/O timeout. The reply deadline moves here,
// one I/O timeout after the first sweep that saw requests outstanding and
// no reply since the last: replies themselves do not read the clock, which
// under pipelining cost more than the rest of the session's work. So a
// timeout fires one to two sweep periods late.
func (s *gearmanLoopSession) Expire(now time.Time) {
	if s.cfg.IOTimeout == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if s.outstanding == 0 || s.answered || s.deadline.IsZero() {
		s.answered = false
		s.deadline = time.Time{}
		if s.outstanding > 0 {
			s.deadline = now.Add(s.cfg.IOTimeout)
		}
	}
	switch {
	case s.outstanding > 0 && !now.Before(s.deadline):
		s.failLocked("read", routing.ErrTimeout)
	case !s.stalled.IsZero() && now.Sub(s.stalled) >= s.cfg.IOTimeout:
		s.failLocked("write", routing.ErrTimeout)
	}
}

// Timed reports whether the backend has an I/O timeout for Expire.
func (s *gearmanLoopSession) Timed() bool { return s.cfg.IOTimeout > 0 }

// Backlog returns the bytes queued and not yet taken by the socket.
func (s *gearmanLoopSession) Backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.out)
}

// Detach releases the socket without reporting.
func (s *gearmanLoopSession) Detach() {
	s.reported = true
	s.mu.Lock()
	s.releaseLocked()
	s.mu.Unlock()
}

// loopReader is the socket as the session's Reader sees it: one read per
// readiness event (epoll.Once).
type loopReader struct{ s *gearmanLoopSession }

// Read reads once from the socket.
func (r loopReader) Read(p []byte) (int, error) { return r.s.once.Read(r.s.rfd, p) }
