//go:build linux

package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/uring"
	"github.com/jobgate/jobgate/proxy/connlimit"
	"github.com/jobgate/jobgate/routing"
)

// bgwLoop serves a Beanstalk gateway's plain TCP client connections and
// their upstream sessions from one goroutine over epoll
// (beanstalk_gateway_loop.go says what runs on it and what does not). It
// is built as beanstalkLoop is: read each ready socket once, run what it
// brought, write each connection that got output once per batch.
//
// Ownership: the loop goroutine owns slots, ups, dirty and every loop
// connection's fields but off while a goroutine has it (then that
// goroutine owns the connection's output and session), signaled and
// closeReq. Other goroutines reach the loop only through mu and the
// eventfd. Client connections have epoll ids >= 0, upstream sessions ids
// below wakeID (bgwUpID).
type bgwLoop struct {
	srv  *BeanstalkServer
	poll *epoll.Poller
	wake *epoll.EventFD

	slots  loopSlots[*bgwLoopConn] // loop only
	ups    loopSlots[bgwUp]        // loop only
	ntimed int                     // loop only: upstream sessions with an I/O timeout
	swept  time.Time               // loop only: the last sweep of upstream timeouts
	dirty  []*bgwLoopConn          // loop only; connections with output to write
	spare  []*bgwLoopConn          // loop only; dirty's other buffer
	evs    [256]syscall.EpollEvent
	reads  [256]int32   // loop only; per client event, its read's index in io, or -1
	io     *uring.Batch // loop only; a batch's reads, then its writes
	upw    upWrites     // loop only; sessions given requests (flushBackends)

	mu       sync.Mutex
	adds     []*bgwLoopConn // guarded by mu; accepted, not yet registered
	attaches []bgwUp        // guarded by mu; upstream sessions opened off the loop
	resumes  []*bgwLoopConn // guarded by mu; connections given back by a goroutine
	ready    []*bgwLoopConn // guarded by mu; signalled (cut off)
	stopping bool           // guarded by mu
	exited   bool           // guarded by mu
	// queued is set (under mu) with each of the above, so that the loop
	// looks at them, under mu, only when there is something.
	queued atomic.Bool

	// Commands run on the loop and handed to a goroutine, and the times
	// a client stopped being read for backpressure, for tests.
	onLoop, offLoop, stalls atomic.Int64
}

// bgwUp is an upstream session on the loop and the connection it serves.
type bgwUp struct {
	u     routing.BeanstalkLoopConn
	owner *bgwLoopConn
}

// bgwLoopConn is a gateway client connection served by the loop.
type bgwLoopConn struct {
	c    *beanstalkConn
	s    *bgwSession
	l    *bgwLoop
	fd   int
	slot int32
	dec  *wire.Decoder

	in  []byte // read, not yet decoded: in[ir:]
	ir  int
	out []byte // replies not yet written

	events  uint32
	wantOut bool  // output waits for room: EPOLLOUT
	dirty   bool  // in l.dirty
	op      int32 // flush's: the write's index in l.io, or -1
	eof     bool  // the client closed its side
	dead    bool  // the socket failed: close without writing
	closed  bool
	quit    bool // quit: close once the replies are written
	// off: a goroutine is running a command of the connection
	// (beanstalk_gateway_loop.go); set and cleared by the loop, the
	// goroutine started after the one and done before the other.
	off bool
	err error // the goroutine's error, for resume

	// The loop has the socket alone (a duplicate, the original closed), so
	// that the runtime's poller does not wake an idle thread for every
	// segment; a goroutine gets a connection of its own on another
	// duplicate (offConn), which is c.nc while it runs (both swaps under
	// srv.mu, where Shutdown reads c.nc). orig is c.nc as accepted: its
	// Close frees the connection's slot under the limits.
	orig  net.Conn
	ncMu  sync.Mutex
	tmpNC net.Conn // guarded by ncMu: the goroutine's connection

	signaled atomic.Bool
	closeReq atomic.Bool
}

// bgwUpID is the epoll id of upstream slot i.
func bgwUpID(i int32) int32 { return wakeID - 1 - i }

// bgwSink is a loop connection's reply output: queued for the loop to
// write, or, while a goroutine has the connection, written to the socket.
type bgwSink struct{ b *bgwLoopConn }

func (k bgwSink) Write(p []byte) (int, error) {
	if k.b.off {
		return beanstalkOut{k.b.c}.Write(p)
	}
	k.b.out = append(k.b.out, p...)
	return len(p), nil
}

// serveGatewayOnLoop hands c to the gateway's event loop, starting it on
// first use; false leaves it to its own goroutine (TLS, a gateway with an
// upstream the loop cannot serve, a loop that cannot start).
func (s *BeanstalkServer) serveGatewayOnLoop(c *beanstalkConn) bool {
	if !s.gw.rt().loopable() {
		return false
	}
	s.mu.Lock()
	if s.gw.loop == nil && !s.shutdown && !s.gw.noLoop {
		l, err := startBgwLoop(s)
		if err != nil {
			s.log.Warn("beanstalk gateway event loop unavailable; serving with goroutines", "err", err)
			s.gw.noLoop = true
		}
		s.gw.loop = l
	}
	l := s.gw.loop
	s.mu.Unlock()
	if l == nil {
		return false
	}
	b := l.adopt(c)
	if b == nil {
		return false
	}
	l.add(b)
	return true
}

// stopGatewayLoop makes the gateway loop close everything and end; with
// s.mu held.
func (s *BeanstalkServer) stopGatewayLoop() {
	if s.gw == nil || s.gw.loop == nil {
		return
	}
	l := s.gw.loop
	l.mu.Lock()
	if !l.exited {
		l.stopping = true
		l.queued.Store(true)
		l.wake.Signal()
	}
	l.mu.Unlock()
}

func startBgwLoop(s *BeanstalkServer) (*bgwLoop, error) {
	p, w, err := epoll.NewWoken(wakeID)
	if err != nil {
		return nil, err
	}
	l := &bgwLoop{srv: s, poll: p, wake: w, io: uring.New()}
	s.wg.Add(1)
	go l.run()
	return l, nil
}

// adopt makes c a loop connection on a duplicate of its socket.
func (l *bgwLoop) adopt(c *beanstalkConn) *bgwLoopConn {
	inner := unwrapConn(c.nc)
	tc, ok := inner.(interface {
		syscall.Conn
		SetNoDelay(bool) error
	})
	if !ok {
		return nil
	}
	tc.SetNoDelay(true)
	fd, err := epoll.DupConn(tc)
	if err != nil {
		return nil
	}
	inner.Close() // out of the runtime's poller; c.nc's Close frees the slot
	b := &bgwLoopConn{c: c, l: l, fd: fd, dec: wire.NewDecoder(l.srv.limits), orig: c.nc}
	s := l.srv.gw.newSession(c)
	s.lc = b
	s.wr = wire.NewWriter(bgwSink{b})
	c.in.wr = s.wr
	b.s = s
	return b
}

func (l *bgwLoop) add(b *bgwLoopConn) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		l.release(b)
		return
	}
	l.adds = append(l.adds, b)
	l.queued.Store(true)
	l.wake.Signal()
	l.mu.Unlock()
}

// release frees what a connection holds once nothing else will use it.
func (l *bgwLoop) release(b *bgwLoopConn) {
	b.s.close()
	syscall.Close(b.fd)
	b.c.nc.Close()
	l.srv.dropConn(b.c)
}

// attach hands an upstream session opened off the loop to the loop.
func (b *bgwLoopConn) attach(u routing.BeanstalkLoopConn) {
	l := b.l
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		u.Close()
		u.Detach()
		return
	}
	l.attaches = append(l.attaches, bgwUp{u, b})
	l.queued.Store(true)
	l.wake.Signal()
	l.mu.Unlock()
}

// signal queues b for the loop to look at (a cut-off).
func (l *bgwLoop) signal(b *bgwLoopConn) {
	if b.signaled.Swap(true) {
		return
	}
	l.mu.Lock()
	if !l.exited {
		l.ready = append(l.ready, b)
		l.queued.Store(true)
		l.wake.Signal()
	}
	l.mu.Unlock()
}

func (l *bgwLoop) run() {
	defer l.srv.wg.Done()
	for {
		// Whatever is queued after this look signals the eventfd, which
		// ends the wait.
		timeout := -1
		if l.queued.Load() {
			timeout = 0
		} else if l.ntimed > 0 {
			timeout = int(upSweep / time.Millisecond)
		}
		n, err := l.poll.Wait(l.evs[:], timeout)
		if err != nil {
			l.srv.log.Error("beanstalk gateway epoll", "err", err)
		}
		l.readAll(n)
		for i := 0; i < n; i++ {
			ev := &l.evs[i]
			switch {
			case ev.Fd == wakeID:
				l.wake.Drain()
			case ev.Fd >= 0:
				if b := l.slots.items[ev.Fd]; b != nil {
					l.event(b, ev.Events, l.reads[i])
				}
			default:
				l.upEvent(wakeID-1-ev.Fd, ev.Events)
			}
		}
		if l.housekeep() {
			return
		}
	}
}

// serve runs b's buffered commands in order until it has served them all,
// one must run off the loop, or output backs up; then it writes the
// replies whose turn has come into b's output for the end of the batch.
func (l *bgwLoop) serve(b *bgwLoopConn) {
	s, c := b.s, b.c
	high := l.outHigh()
	// The upstream backlog is looked at once per batch (and again by
	// interest): a batch adds at most what one read brought.
	if l.backlogged(b, high) {
		l.settle(b)
		return
	}
	for !b.closed && !b.quit && !b.off && len(b.out) < high {
		if s.waiting.Load() {
			// A reserve forwarded by the loop waits: what follows runs
			// after its reply, as on beanstalkd; input is still read, for
			// a hang-up.
			if s.settleDone() != nil {
				b.dead = true
				l.close(b)
				return
			}
			if s.waiting.Load() {
				break
			}
		}
		n, cmd, err := b.dec.Decode(b.in[b.ir:])
		b.ir += n
		if cmd == nil && err == nil {
			if n == 0 {
				break
			}
			continue
		}
		if err != nil { // a *wire.ClientError: nothing else comes from Decode
			ce := err.(*wire.ClientError)
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
		c.watch.frames.Add(1)
		if cmd.Verb == wire.Quit {
			b.quit = true
			break
		}
		s.rt = s.gw.rt()
		if !s.loopCan(cmd) {
			l.handoff(b, cmd)
			return
		}
		l.onLoop.Add(1)
		if err := s.execLoop(cmd); err != nil {
			b.dead = true
			l.close(b)
			return
		}
	}
	if b.closed {
		return
	}
	l.settle(b)
}

// settle writes the replies whose turn has come, queues b's output for
// the end of the batch, and closes b once a quit or a hang-up has had
// all its replies written.
func (l *bgwLoop) settle(b *bgwLoopConn) {
	s := b.s
	if s.settleDone() != nil || s.wr.Flush() != nil {
		b.dead = true
		l.close(b)
		return
	}
	if b.ir == len(b.in) {
		b.in, b.ir = b.in[:0], 0
		if cap(b.in) > bloopKeep {
			b.in = nil
		}
	}
	b.c.watch.setFlag(watchPartial, len(s.fifo) == 0 && (b.ir < len(b.in) || b.dec.Partial()))
	if (b.quit || b.eof) && len(s.fifo) == 0 && len(b.out) == 0 {
		l.close(b)
		return
	}
	if len(b.out) > 0 && !b.wantOut {
		l.markDirty(b)
	}
	l.interest(b)
}

// housekeep registers new connections and upstream sessions, resumes
// connections, sweeps upstream timeouts, writes what the batch produced,
// and on shutdown closes everything; true when the loop must end.
func (l *bgwLoop) housekeep() bool {
	var adds, resumes, ready []*bgwLoopConn
	var attaches []bgwUp
	stopping := false
	if l.queued.Load() {
		l.mu.Lock()
		l.queued.Store(false)
		adds, attaches, resumes, ready = l.adds, l.attaches, l.resumes, l.ready
		l.adds, l.attaches, l.resumes, l.ready = nil, nil, nil, nil
		stopping = l.stopping
		l.mu.Unlock()
	}
	for _, b := range adds {
		l.register(b)
	}
	for _, up := range attaches {
		l.attachUp(up)
	}
	for _, b := range resumes {
		l.resumeConn(b)
	}
	for _, b := range ready {
		b.signaled.Store(false)
		if !b.closed && !b.off && b.closeReq.Load() {
			l.close(b)
		}
	}
	// The clock is read on every iteration while an upstream session has
	// a timeout running, so a sweep comes at most one wait (upSweep) late.
	if l.ntimed > 0 {
		if now := time.Now(); now.Sub(l.swept) >= upSweep {
			l.swept = now
			for _, up := range l.ups.items {
				if up.u != nil {
					up.u.Expire(now)
				}
			}
		}
	}
	l.flush()
	if !stopping {
		return false
	}
	for _, b := range l.slots.items {
		if b != nil && !b.off {
			l.close(b)
		}
	}
	for i, up := range l.ups.items {
		if up.u != nil {
			up.u.Close()
			up.u.Detach()
			l.ups.items[i] = bgwUp{}
		}
	}
	l.mu.Lock()
	l.exited = true
	adds, attaches = l.adds, l.attaches
	l.adds, l.attaches = nil, nil
	resumes = l.resumes
	l.resumes = nil
	l.mu.Unlock()
	for _, b := range adds {
		l.release(b)
	}
	for _, up := range attaches {
		up.u.Close()
		up.u.Detach()
	}
	for _, b := range resumes {
		b.dropOffConn()
		if !b.closed {
			b.closed = true
			l.srv.guard.unwatch(&b.c.watch)
			l.release(b)
		}
	}
	l.poll.Close()
	l.io.Close()
	l.mu.Lock()
	l.wake.Close()
	l.mu.Unlock()
	return true
}

// register adds b to the poller and puts it under the timeouts.
func (l *bgwLoop) register(b *bgwLoopConn) {
	b.slot = l.slots.add(b)
	b.events = epoll.In | epoll.Err
	if err := l.poll.Add(b.fd, b.events, b.slot); err != nil {
		l.srv.log.Debug("beanstalk gateway epoll add", "err", err)
		b.dead = true
		l.close(b)
		return
	}
	l.srv.guard.watch(&b.c.watch, b.s.busy, func(connlimit.Reason) {
		b.closeReq.Store(true)
		b.ncMu.Lock()
		if b.tmpNC != nil {
			b.tmpNC.Close() // ends a goroutine's blocked write or read
		}
		b.ncMu.Unlock()
		l.signal(b)
	})
}

// close ends a loop connection: its backend sessions close (their
// reservations go back to ready), its last output gets one write, and the
// socket closes.
func (l *bgwLoop) close(b *bgwLoopConn) {
	if b.closed {
		return
	}
	b.closed = true
	if !b.dead && len(b.out) > 0 {
		epoll.Write(b.fd, b.out)
	}
	b.out, b.in = nil, nil
	l.srv.guard.unwatch(&b.c.watch)
	l.poll.Del(b.fd)
	l.slots.remove(b.slot, b)
	l.release(b)
}
