//go:build linux

package proxy

import (
	"net"
	"os"
	"syscall"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/epoll"
)

// The gateway loop's hand-offs (beanstalk_gateway_loop.go): upstream
// sessions opened off the loop and attached to it, and client
// connections whose command a goroutine runs, given back when it is done.

// upEvent hands an upstream session its events, then serves its
// connection: the replies it delivered go out in this batch.
func (l *bgwLoop) upEvent(i int32, events uint32) {
	if i < 0 || int(i) >= len(l.ups.items) || l.ups.items[i].u == nil {
		return
	}
	up := l.ups.items[i]
	if !up.u.Ready(events) {
		if up.u.Timed() {
			l.ntimed--
		}
		l.ups.release(i)
	}
	if b := up.owner; !b.closed && !b.off {
		l.serve(b)
	}
}

// handoff runs cmd, and what its handling needs (dialling, waiting for
// several backends), on a goroutine; the loop leaves b alone until resume.
func (l *bgwLoop) handoff(b *bgwLoopConn, cmd *wire.Command) {
	l.offLoop.Add(1)
	s := b.s
	s.flushBackends()
	s.wr.Flush() // into out, which the goroutine writes first
	b.off = true
	// Out of the poller, not merely with no events: a hang-up would be
	// reported all the while.
	l.poll.Del(b.fd)
	b.events = 0
	_, nerr := b.offConn()
	l.srv.wg.Add(1)
	go func() {
		defer l.srv.wg.Done()
		err := nerr
		if err == nil && len(b.out) > 0 {
			_, err = beanstalkOut{b.c}.Write(b.out)
			b.out = b.out[:0]
			b.wantOut = false
		}
		if err == nil {
			err = s.execIn(cmd)
		}
		if err == nil {
			err = s.wr.Flush()
		}
		l.resume(b, err)
	}()
}

// resume gives b back to the loop after a goroutine ran its command.
func (l *bgwLoop) resume(b *bgwLoopConn, err error) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		// The loop is gone: nothing else has b.
		l.srv.guard.unwatch(&b.c.watch)
		b.dropOffConn()
		l.release(b)
		return
	}
	b.err = err
	l.resumes = append(l.resumes, b)
	l.queued.Store(true)
	l.wake.Signal()
	l.mu.Unlock()
}

// offConn gives the goroutine about to run a command of b a connection
// of its own on the socket, as c.nc.
func (b *bgwLoopConn) offConn() (net.Conn, error) {
	d, err := syscall.Dup(b.fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "beanstalk-gateway")
	nc, err := net.FileConn(f) // a duplicate of its own
	f.Close()
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	b.ncMu.Lock()
	b.tmpNC = nc
	b.ncMu.Unlock()
	b.swapNC(nc)
	if b.closeReq.Load() {
		nc.Close() // cut off while being handed over
	}
	return nc, nil
}

// swapNC makes nc the connection's c.nc.
func (b *bgwLoopConn) swapNC(nc net.Conn) {
	srv := b.l.srv
	srv.mu.Lock()
	b.c.nc = nc
	srv.mu.Unlock()
}

// dropOffConn gives c.nc back to the accepted connection and closes the
// goroutine's.
func (b *bgwLoopConn) dropOffConn() {
	b.ncMu.Lock()
	nc := b.tmpNC
	b.tmpNC = nil
	b.ncMu.Unlock()
	if nc != nil {
		b.swapNC(b.orig)
		nc.Close()
	}
}

// resumeConn takes b back from its goroutine and serves what is buffered.
func (l *bgwLoop) resumeConn(b *bgwLoopConn) {
	b.off = false
	b.dropOffConn()
	if b.closed {
		return
	}
	if b.err != nil || b.closeReq.Load() {
		b.dead = b.err != nil
		l.close(b)
		return
	}
	if in := &b.c.in; len(in.ahead) > 0 { // read ahead by a waiting reserve
		b.in = append(b.in, in.ahead...)
		in.ahead = in.ahead[:0]
	}
	b.events = epoll.In | epoll.Err
	if err := l.poll.Add(b.fd, b.events, b.slot); err != nil {
		b.dead = true
		l.close(b)
		return
	}
	l.serve(b)
}

// attachUp registers an upstream session under a free upstream slot.
func (l *bgwLoop) attachUp(up bgwUp) {
	i := l.ups.reserve()
	if up.u.Attach(l.poll, bgwUpID(i)) != nil {
		l.ups.release(i)
		if b := up.owner; !b.closed && !b.off {
			l.serve(b)
		}
		return
	}
	l.ups.items[i] = up
	if up.u.Timed() {
		l.ntimed++
	}
}
