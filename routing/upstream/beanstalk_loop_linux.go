//go:build linux

package upstream

import (
	"context"
	"io"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/routing"
)

var _ routing.BeanstalkLoopBackend = (*Beanstalk)(nil)

// CanLoop reports whether OpenLoop can serve this backend: plain TCP only
// (a TLS connection needs its own reads and writes, which may block).
func (b *Beanstalk) CanLoop() bool { return b.cfg.TLS == nil }

// OpenLoop connects, as Open does, and returns a session served by the
// caller's event loop (routing.BeanstalkLoopConn). It is the same session
// as Open's (reserve rounds, Cancel, giving back a job a cancelled reserve
// got) with the reader goroutine replaced by the loop's Ready and the
// writes made without blocking. It blocks while dialling: call it off the
// loop.
func (b *Beanstalk) OpenLoop(ctx context.Context, closed func(error)) (routing.BeanstalkLoopConn, error) {
	fd, err := b.cfg.dialLoop(ctx)
	if err != nil {
		return nil, err
	}
	s := &beanstalkSession{b: b, closed: closed}
	lp := &beanstalkLoopIO{beanstalkSession: s, s: s, loopSocket: loopSocket{fd: fd}, rfd: fd, lim: b.cfg.Limits.WithDefaults()}
	s.lp = lp
	s.w = beanstalk.NewWriter(loopSink{lp})
	return lp, nil
}

// beanstalkLoopIO is the event-loop side of a beanstalkSession: its socket,
// the output the socket has not taken yet, and the input not yet decoded.
//
// The loop goroutine owns rfd, in, ir, skip, reply and reported. out,
// wantOut, stalled, poll and id are guarded by the session's wmu (every
// write holds it); fd by wmu and mu together (the loop closes it holding
// both, so a writer or fail never uses a reused descriptor number).
type beanstalkLoopIO struct {
	*beanstalkSession // Do, Flush, Cancel, Close
	s                 *beanstalkSession
	lim               beanstalk.Limits

	rfd      int    // loop only: the socket, open until end or Detach
	in       []byte // loop only: read, not yet decoded: in[ir:]
	ir       int
	rb       routing.IOBatch // loop only: the batch ReadInto queued the next read in, or nil
	rop      int             // loop only: that read's index
	skip     uint64          // loop only: bytes of a too-big body still to drop
	reply    beanstalk.Reply
	reported bool       // loop only: the end was handled
	low      lowatState // loop only: the receive low-water mark (beanstalk_lowat_linux.go)

	loopSocket // fd, out, wantOut, stalled, poll, id: see above
	// backlog is len(out), stored by every writer of out (under wmu), so
	// that Backlog, asked a few times per client batch, takes no lock.
	backlog atomic.Int64
}

// loopReadMin is the least room a read of replies is offered.
const loopReadMin = 4096

// loopSink is the session's Writer output: queued, and written with one
// system call when the session flushes (flushLocked), or sooner once
// loopSinkHigh is queued. The session's wmu is held.
type loopSink struct{ l *beanstalkLoopIO }

// loopSinkHigh bounds what a sink queues before it writes.
const loopSinkHigh = 256 << 10

func (k loopSink) Write(p []byte) (int, error) {
	l := k.l
	l.out = append(l.out, p...)
	l.backlog.Store(int64(len(l.out)))
	if len(l.out) >= loopSinkHigh && !l.wantOut {
		if err := l.writeLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// queueCommand appends cmd's wire form to the output straight, not
// through the session's Writer, which would copy it once more into the
// sink; wmu is held. A failed write fails the session.
func (l *beanstalkLoopIO) queueCommand(cmd *beanstalk.Command) {
	l.out = cmd.AppendTo(l.out)
	l.backlog.Store(int64(len(l.out)))
	if len(l.out) >= loopSinkHigh && !l.wantOut {
		_ = l.writeLocked()
	}
}

// flushLocked writes what the sink queued, unless it waits for room
// (Ready writes it then); wmu is held.
func (l *beanstalkLoopIO) flushLocked() error {
	if l.wantOut {
		return nil
	}
	return l.writeLocked()
}

// writeLocked makes one non-blocking write of the queued output; wmu is
// held.
func (l *beanstalkLoopIO) writeLocked() error {
	if len(l.out) == 0 || l.fd < 0 {
		return nil
	}
	err := l.writeOut()
	l.backlog.Store(int64(len(l.out)))
	if err != nil {
		return l.s.fail("write", err)
	}
	return nil
}

// WriteInto queues the write of the waiting output in b, having set the
// mark for the replies its commands will bring.
func (l *beanstalkLoopIO) WriteInto(b routing.IOBatch) bool {
	l.setLowat()
	l.s.wmu.Lock()
	ok := l.s.failed() == nil && l.takeOut(b)
	l.s.wmu.Unlock()
	return ok
}

// Wrote takes the result of WriteInto's write.
func (l *beanstalkLoopIO) Wrote() {
	l.s.wmu.Lock()
	err := l.wroteOut()
	l.backlog.Store(int64(len(l.out)))
	l.s.wmu.Unlock()
	if err != nil {
		l.s.fail("write", err)
	}
}

// ReadInto queues the next read of replies in b.
func (l *beanstalkLoopIO) ReadInto(b routing.IOBatch) bool {
	if l.reported {
		return false
	}
	l.rb, l.rop = b, b.Read(l.rfd, l.room())
	return true
}

// shutdown makes the socket readable for the loop (EOF, HUP) and tells the
// server the connection is over, without freeing the descriptor.
func (l *beanstalkLoopIO) shutdown(s *beanstalkSession) {
	s.mu.Lock()
	l.loopSocket.shutdown()
	s.mu.Unlock()
}

// Attach registers the socket with p.
func (l *beanstalkLoopIO) Attach(p routing.Poller, id int32) error {
	l.s.wmu.Lock()
	err := l.attach(p, id)
	l.s.wmu.Unlock()
	if err != nil {
		l.s.fail("attach", err)
		l.end()
	}
	return err
}

// Ready handles the events the loop saw on the socket.
func (l *beanstalkLoopIO) Ready(events uint32) bool {
	if l.reported {
		return false
	}
	s := l.s
	if events&epoll.Out != 0 {
		s.wmu.Lock()
		if s.failed() == nil {
			_ = l.writeLocked()
		}
		s.wmu.Unlock()
	}
	if events&(epoll.In|epoll.Err) != 0 && s.failed() == nil {
		l.read()
	}
	l.rb = nil // a read queued for a session that failed meanwhile
	if s.failed() != nil {
		l.end()
		return false
	}
	return true
}

// room makes room for a read of replies and returns it.
func (l *beanstalkLoopIO) room() []byte {
	if l.ir > 0 && l.ir == len(l.in) {
		l.in, l.ir = l.in[:0], 0
	}
	if cap(l.in)-len(l.in) < loopReadMin {
		if l.ir > 0 {
			l.in = l.in[:copy(l.in[:cap(l.in)], l.in[l.ir:])]
			l.ir = 0
		}
		if cap(l.in)-len(l.in) < loopReadMin {
			buf := make([]byte, len(l.in), 2*cap(l.in)+loopReadMin)
			copy(buf, l.in)
			l.in = buf
		}
	}
	return l.in[len(l.in):cap(l.in)]
}

// read reads the socket once, or takes what ReadInto's read brought, and
// delivers every whole reply.
func (l *beanstalkLoopIO) read() {
	s := l.s
	var n int
	var err error
	if l.rb != nil {
		n, err = l.rb.Result(l.rop)
		l.rb = nil
	} else {
		n, err = epoll.Read(l.rfd, l.room())
	}
	switch {
	case err == syscall.EAGAIN:
		return
	case err != nil:
		s.fail("read", err)
		return
	case n == 0:
		s.fail("read", io.EOF)
		return
	}
	l.in = l.in[:len(l.in)+n]
	for s.failed() == nil {
		if l.skip > 0 {
			k := min(l.skip, uint64(len(l.in)-l.ir))
			l.ir += int(k)
			if l.skip -= k; l.skip > 0 {
				break
			}
		}
		m, err := beanstalk.DecodeReply(l.in[l.ir:], l.lim, &l.reply)
		if big, ok := err.(*beanstalk.ReplyTooBigError); ok {
			l.ir += m
			l.skip = big.Size + 2
			if !s.deliver(nil, big) {
				break
			}
			l.low.replies++
			continue
		}
		if err != nil {
			s.fail("read", err)
			break
		}
		if m == 0 {
			break
		}
		l.ir += m
		if !s.deliver(&l.reply, nil) {
			break
		}
		l.low.replies++
	}
	if l.ir == len(l.in) {
		l.in, l.ir = l.in[:0], 0
		if cap(l.in) > 1<<20 {
			l.in = nil
		}
	}
	if s.failed() == nil {
		l.setLowat()
	}
}

// end releases the socket, answers what is pending and reports why the
// session ended, once, unless Close ended it.
func (l *beanstalkLoopIO) end() {
	if l.reported {
		return
	}
	l.reported = true
	s := l.s
	l.release()
	err := s.failed()
	s.drain(err)
	if !s.quiet.Load() && s.closed != nil {
		s.closed(err)
	}
}

// release removes the socket from the poller and closes it.
func (l *beanstalkLoopIO) release() {
	s := l.s
	s.wmu.Lock()
	s.mu.Lock()
	l.loopSocket.release()
	l.backlog.Store(0)
	s.mu.Unlock()
	s.wmu.Unlock()
}

// Expire fails the session when a reply is overdue or output has waited
// for room for longer than the I/O timeout. The reply deadline is set
// here, an I/O timeout (plus what a reserve round may rightly wait) after
// the first sweep that saw the oldest command pending, so that replies
// need not read the clock; a timeout fires up to a sweep period late.
// It also gives up a receive mark that no reply came under (sweepLowat).
func (l *beanstalkLoopIO) Expire(now time.Time) {
	l.sweepLowat(now)
	s := l.s
	if s.b.cfg.IOTimeout == 0 {
		return
	}
	s.wmu.Lock()
	stalled := l.stalled
	s.wmu.Unlock()
	s.mu.Lock()
	if s.rearm || len(s.queue) == 0 {
		s.rearm = false
		s.deadline = time.Time{}
		if len(s.queue) > 0 {
			s.deadline = now.Add(s.b.cfg.IOTimeout + s.queue[0].wait)
		}
	}
	late := s.err == nil && len(s.queue) > 0 && !now.Before(s.deadline)
	s.mu.Unlock()
	switch {
	case late:
		s.fail("read", routing.ErrTimeout)
	case !stalled.IsZero() && now.Sub(stalled) >= s.b.cfg.IOTimeout:
		s.fail("write", routing.ErrTimeout)
	}
}

// Timed reports whether the backend has an I/O timeout for Expire.
func (l *beanstalkLoopIO) Timed() bool { return l.s.b.cfg.IOTimeout > 0 }

// Backlog returns the bytes queued and not yet taken by the socket.
func (l *beanstalkLoopIO) Backlog() int { return int(l.backlog.Load()) }

// Detach releases the socket without reporting.
func (l *beanstalkLoopIO) Detach() {
	l.reported = true
	l.release()
	l.s.drain(routing.ErrClosed)
}
