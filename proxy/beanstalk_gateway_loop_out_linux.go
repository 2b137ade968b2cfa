//go:build linux

package proxy

import (
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/proxy/connlimit"
	"github.com/jobgate/jobgate/routing"
)

// The gateway loop's output to its clients, and backpressure: a client is
// not read while its replies, or its upstream sessions' requests, wait.

// backlogged reports whether one of b's upstream sessions has more than
// half of high waiting for its server to read: b's commands then wait, as
// a goroutine connection's would on its write.
func (l *bgwLoop) backlogged(b *bgwLoopConn, high int) bool {
	for _, be := range b.s.open {
		if be.loop != nil && be.loop.Backlog() > high/2 {
			return true
		}
	}
	return false
}

// flush writes every client connection that got output and every
// upstream session given requests, all with one batch. A write that
// drains a stalled connection serves its next commands, which may mark
// more.
func (l *bgwLoop) flush() {
	io := l.io
	for len(l.dirty) > 0 || l.upw.pending() {
		batch := l.dirty
		l.dirty = l.spare[:0]
		io.Reset()
		for _, b := range batch {
			b.dirty = false
			b.op = -1
			if !b.closed && !b.off && len(b.out) > 0 {
				b.op = int32(io.Write(b.fd, b.out))
			}
		}
		l.upw.queue(io)
		io.Run()
		l.upw.done()
		for i, b := range batch {
			batch[i] = nil
			if b.op >= 0 {
				n, err := io.Result(int(b.op))
				l.wrote(b, n, err)
			}
		}
		l.spare = batch[:0]
	}
}

// deferFlush lists u, a session of s's connection, for the loop's batch of
// writes, when the loop is running the connection's commands; false
// otherwise (no loop, or a goroutine has the connection), for the caller
// to flush at once.
func (s *bgwSession) deferFlush(u routing.LoopSession) bool {
	lc := s.lc
	if lc == nil || lc.off {
		return false
	}
	lc.l.upw.add(u)
	return true
}

func (l *bgwLoop) markDirty(b *bgwLoopConn) {
	if !b.dirty && !b.closed {
		b.dirty = true
		l.dirty = append(l.dirty, b)
	}
}

// write sends b's output with one non-blocking write; the rest waits for
// EPOLLOUT.
func (l *bgwLoop) write(b *bgwLoopConn) {
	if b.closed || b.off || len(b.out) == 0 {
		return
	}
	n, err := epoll.Write(b.fd, b.out)
	l.wrote(b, n, err)
}

// wrote follows up a write of b's output that took n bytes: a failed one
// closes b, a slow reader is cut off, and b is served again or waits for
// room.
func (l *bgwLoop) wrote(b *bgwLoopConn, n int, err error) {
	w := &b.c.watch
	b.out = b.out[:copy(b.out, b.out[n:])]
	if err != nil {
		b.dead = true
		l.close(b)
		return
	}
	if n > 0 {
		w.wrote.Add(1)
	}
	if l.cutSlow(b) {
		return
	}
	w.setFlag(watchWriting, len(b.out) > 0)
	if len(b.out) == 0 && cap(b.out) > bloopKeep {
		b.out = nil
	}
	b.wantOut = len(b.out) > 0
	if len(b.out) < l.outHigh() {
		if b.ir == len(b.in) && !b.eof && !b.quit && b.events == epoll.In|epoll.Err && !b.wantOut {
			// The usual case, all written with input watched and
			// nothing buffered: serve would find nothing to do.
			return
		}
		l.serve(b) // commands left waiting for room, or an end of input
		return
	}
	l.interest(b)
}

// interest registers the events b needs now: input unless it is at end of
// input, quit or blocked on output; output room while output waits.
func (l *bgwLoop) interest(b *bgwLoopConn) {
	var ev uint32
	high := l.outHigh()
	if !b.eof && !b.quit {
		if len(b.out) < high && !l.backlogged(b, high) && !(b.s.waiting.Load() && len(b.in)-b.ir >= maxReadAhead) {
			ev = epoll.In | epoll.Err
		} else if b.events&epoll.In != 0 {
			l.stalls.Add(1)
		}
	}
	if b.wantOut {
		ev |= epoll.Out
	}
	if ev != b.events && l.poll.Mod(b.fd, ev, b.slot) == nil {
		b.events = ev
	}
}

// outHigh is beanstalkLoop.outHigh for the gateway loop.
func (l *bgwLoop) outHigh() int {
	if n := l.srv.guard.current().WriteBufferLimit; n > 0 && n < bloopOutHigh {
		return n
	}
	return bloopOutHigh
}

// cutSlow is beanstalkLoop.cutSlow for the gateway loop.
func (l *bgwLoop) cutSlow(b *bgwLoopConn) bool {
	n := l.srv.guard.current().WriteBufferLimit
	if n <= 0 || len(b.out) <= n {
		return false
	}
	if s := l.srv.connSeries; s != nil {
		s.Cut(connlimit.ReasonSlowReader.String())
	}
	b.dead = true
	l.close(b)
	return true
}
