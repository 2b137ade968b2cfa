//go:build linux

package proxy

import (
	"sync"
	"syscall"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/uring"
)

// gearmanLoop serves every TCP connection of a GearmanServer from one
// goroutine over epoll, the way gearmand --threads=0 does with libevent.
//
// Why: with a goroutine per connection, each Gearman job (client submit,
// worker grab, worker complete) costs two goroutine wakeups through the
// runtime's poller, a read that only returns EAGAIN before each park, and
// the thread sleeps and wakeups of a scheduler whose Ps run dry between
// packets. Profiles showed that bookkeeping costing more CPU than the
// protocol. The loop reads each ready socket once (level-triggered epoll
// calls it again if more is waiting), hands the frames to the engine, and
// after the whole batch of ready sockets writes each connection that got
// output with one write: replies to its own requests and packets other
// connections caused (JOB_ASSIGN, WORK_COMPLETE, NOOP) alike.
//
// Ownership: the loop goroutine owns slots, the dirty batch it
// flushes, and each loop connection's reader, fd and closed flag. Other
// goroutines (the engine's timer, Shutdown, Serve) reach it only through
// l.mu and the eventfd. Lock order: engine lock, gearmanConn.mu,
// gearmanLoop.mu.
type gearmanLoop struct {
	srv  *GearmanServer
	poll *epoll.Poller
	wake *epoll.EventFD

	slots loopSlots[*gearmanConn] // loop only
	batch []*gearmanConn          // loop only; the dirty list being flushed
	evs   [256]syscall.EpollEvent
	reads [256]int32   // loop only; per event, its read's index in io, or -1
	io    *uring.Batch // loop only; a batch's reads, then its writes
	// engineUsed, loop only: the batch handed requests to the local
	// engine, which may hold journal records for the loop (housekeep).
	engineUsed bool

	mu       sync.Mutex
	adds     []*gearmanConn // guarded by mu; accepted, not yet registered
	dirty    []*gearmanConn // guarded by mu; connections with output or a close request
	stopping bool           // guarded by mu; Shutdown called
	exited   bool           // guarded by mu; the loop has closed everything

	loopUpstreams // gateway upstream sessions (gearman_loop_upstream_linux.go)
}

// wakeID is the epoll id of the eventfd; connection slots are >= 0.
const wakeID = -1

// startGearmanLoop opens the poller and starts the loop goroutine.
func startGearmanLoop(s *GearmanServer) (*gearmanLoop, error) {
	p, w, err := epoll.NewWoken(wakeID)
	if err != nil {
		return nil, err
	}
	l := &gearmanLoop{srv: s, poll: p, wake: w, io: uring.New()}
	s.wg.Add(1)
	go l.run()
	return l, nil
}

// adopt takes an accepted TCP connection into the loop; false leaves it to
// a goroutine pair (its socket could not be taken over).
func (l *gearmanLoop) adopt(c *gearmanConn) bool {
	inner := unwrapConn(c.nc) // the admitted wrapper is closed in close
	tc, ok := inner.(syscall.Conn)
	if !ok {
		return false
	}
	fd, err := epoll.DupConn(tc)
	if err != nil {
		return false
	}
	// The duplicate keeps the socket open; closing the original takes it
	// out of the runtime's poller, which would otherwise wake a thread
	// for every packet that arrives.
	inner.Close()
	c.fd = fd
	c.loop = l
	c.rd = codec.NewReader(loopInput{c}, l.srv.cfg.Limits)
	return true
}

// add hands a new loop connection to the loop goroutine.
func (l *gearmanLoop) add(c *gearmanConn) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		c.sess.Close()
		syscall.Close(c.fd)
		c.nc.Close() // frees its slot under the connection limits
		l.srv.removeConn(c)
		l.srv.wg.Done()
		return
	}
	l.adds = append(l.adds, c)
	l.mu.Unlock()
	l.wake.Signal()
}

// markDirty queues c for the loop's next flush. Called with c.mu released,
// from the loop (during Handle) or any other goroutine; those must call
// kick afterwards (GearmanServer.flushDirty does).
func (l *gearmanLoop) markDirty(c *gearmanConn) {
	l.mu.Lock()
	l.dirty = append(l.dirty, c)
	l.mu.Unlock()
}

// kick wakes the loop if another goroutine left it work.
func (l *gearmanLoop) kick() {
	l.mu.Lock()
	work := len(l.dirty) > 0
	l.mu.Unlock()
	if work {
		l.wake.Signal()
	}
}

// stop makes the loop close every connection and end.
func (l *gearmanLoop) stop() {
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
	l.wake.Signal()
}

// run is the loop goroutine.
func (l *gearmanLoop) run() {
	defer l.srv.wg.Done()
	for {
		if l.engineUsed {
			// Never wait with journal records of ours unwritten. Nothing
			// reads requests after housekeep's WriteQueued today (the
			// Beanstalk loop's flush does); this keeps the rule if that
			// changes. What this releases is flushed before the wait.
			l.engineUsed = false
			l.srv.engine.WriteQueued()
			l.flush()
			l.srv.flushGoroutineDirty()
		}
		n, err := l.poll.Wait(l.evs[:], l.waitMsec())
		if err != nil {
			l.srv.log.Error("gearman epoll", "err", err)
		}
		l.readAll(n)
		for i := 0; i < n; i++ {
			ev := &l.evs[i]
			if ev.Fd == wakeID {
				l.wake.Drain()
				continue
			}
			if ev.Fd < wakeID {
				l.upReady(ev.Fd, ev.Events)
				continue
			}
			c := l.slots.items[ev.Fd]
			if c == nil {
				continue
			}
			if ev.Events&epoll.Out != 0 {
				l.write(c)
			}
			if ev.Events&(epoll.In|epoll.Err) != 0 && !c.closed {
				if l.reads[i] >= 0 {
					l.frames(c)
				} else {
					l.read(c)
				}
			}
		}
		l.sweep()
		if l.housekeep() {
			return
		}
	}
}

// readAll reads, with one batch, every connection and upstream session of
// the first n events that reported input, into its Reader's free space;
// the event pass then runs the frames (frames, upReady). One whose buffer
// is full is left to read, which grows it.
func (l *gearmanLoop) readAll(n int) {
	l.io.Reset()
	for i := 0; i < n; i++ {
		ev := &l.evs[i]
		l.reads[i] = -1
		if ev.Fd == wakeID || ev.Events&(epoll.In|epoll.Err) == 0 {
			continue
		}
		if ev.Fd < wakeID {
			if k := wakeID - 1 - ev.Fd; int(k) < len(l.ups.items) && l.ups.items[k] != nil {
				l.ups.items[k].ReadInto(l.io) // upReady takes what it brings
			}
			continue
		}
		if c := l.slots.items[ev.Fd]; c != nil && !c.closed {
			if space := c.rd.Space(); len(space) > 0 {
				l.reads[i] = int32(l.io.Read(c.fd, space))
			}
		}
	}
	l.io.Run()
	for i := 0; i < n; i++ {
		k := l.reads[i]
		if k < 0 {
			continue
		}
		c := l.slots.items[l.evs[i].Fd]
		if got := c.once.Took(l.io.Result(int(k))); got > 0 {
			c.rd.Filled(got)
		}
	}
}

// housekeep registers new connections, writes what the batch produced,
// and on shutdown closes everything; true when the loop must end.
func (l *gearmanLoop) housekeep() bool {
	l.mu.Lock()
	adds := l.adds
	l.adds = nil
	stopping := l.stopping
	l.mu.Unlock()
	for _, c := range adds {
		l.register(c)
	}
	l.upstreamWork()
	l.unthrottle()
	if l.engineUsed {
		// The journal records of this batch's requests: written here, and
		// the output they held released, so it goes out in this batch.
		l.engineUsed = false
		l.srv.engine.WriteQueued()
	}
	l.flush()
	// Goroutine connections this batch gave output to.
	l.srv.flushGoroutineDirty()
	if !stopping {
		return false
	}
	for _, c := range l.slots.items {
		if c != nil {
			l.close(c)
		}
	}
	l.flush()
	l.mu.Lock()
	l.exited = true
	adds = l.adds
	l.adds = nil
	l.mu.Unlock()
	for _, c := range adds {
		l.register(c)
		l.close(c)
	}
	l.stopUpstreams()
	l.poll.Close()
	l.wake.Close()
	l.io.Close()
	return true
}

// register adds c to the poller.
func (l *gearmanLoop) register(c *gearmanConn) {
	c.slot = l.slots.add(c)
	if err := l.poll.Add(c.fd, epoll.In|epoll.Err, c.slot); err != nil {
		l.srv.log.Debug("gearman epoll add", "err", err)
		l.close(c)
	}
}

// flush writes the output of every connection marked dirty and the
// requests of every upstream session given some (upw), all with one
// batch, and closes the connections asked to close. Writes done here may
// mark more (a closing session fails its jobs' clients), so it runs until
// both lists are empty.
func (l *gearmanLoop) flush() {
	io := l.io
	for {
		l.mu.Lock()
		batch := l.dirty
		l.dirty = l.batch[:0]
		l.mu.Unlock()
		if len(batch) == 0 && !l.upw.pending() {
			l.batch = batch
			return
		}
		io.Reset()
		for i, c := range batch {
			if c.closed || c.writing { // closed, or listed twice
				batch[i] = nil
				continue
			}
			if c.closeReq.Load() {
				l.close(c)
				batch[i] = nil
				continue
			}
			if !l.takeOut(c) {
				batch[i] = nil
				continue
			}
			c.op = int32(io.Write(c.fd, c.wbuf))
		}
		l.upw.queue(io)
		io.Run()
		l.upw.done()
		for i, c := range batch {
			batch[i] = nil
			if c != nil {
				n, err := io.Result(int(c.op))
				l.wrote(c, n, err)
			}
		}
		l.batch = batch[:0]
	}
}

// write sends what c has queued with one non-blocking write; the rest
// waits for EPOLLOUT.
func (l *gearmanLoop) write(c *gearmanConn) {
	if c.closed || !l.takeOut(c) {
		return
	}
	n, err := epoll.Write(c.fd, c.wbuf)
	l.wrote(c, n, err)
}

// takeOut takes c's queued bytes into c.wbuf for a write, leaving c.out
// to what other goroutines queue meanwhile (wrote puts it behind what the
// write leaves); false, and c closed, if its output is dead.
func (l *gearmanLoop) takeOut(c *gearmanConn) bool {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		l.close(c)
		return false
	}
	c.wbuf, c.out, c.spare = c.out, c.spare[:0], nil
	c.writing = true
	c.mu.Unlock()
	return true
}

// wrote follows up a write of c.wbuf that took n bytes: what it left goes
// back ahead of what was queued since, and EPOLLOUT is registered while
// anything is left.
func (l *gearmanLoop) wrote(c *gearmanConn, n int, err error) {
	buf := c.wbuf
	c.wbuf, c.writing = nil, false
	c.mu.Lock()
	if err != nil {
		c.dead = true
		c.out = c.out[:0]
		c.mu.Unlock()
		l.close(c)
		return
	}
	rest := len(buf) - n
	if rest > 0 {
		buf = append(buf[:copy(buf, buf[n:])], c.out...)
		c.out, c.spare = buf, c.out[:0]
	} else if cap(buf) <= 1<<20 { // drop a buffer a burst grew
		c.spare = buf[:0]
	}
	if n > 0 {
		c.watch.wrote.Add(1)
	}
	c.watch.setFlag(watchWriting, rest > 0)
	c.mu.Unlock()
	if want := rest > 0; want != c.wantOut && !c.paused {
		ev := uint32(epoll.In | epoll.Err)
		if want {
			ev |= epoll.Out
		}
		if l.poll.Mod(c.fd, ev, c.slot) == nil {
			c.wantOut = want
		}
	}
}

// read reads c's socket once and runs every complete frame.
func (l *gearmanLoop) read(c *gearmanConn) {
	c.once.Arm()
	l.frames(c)
}

// frames runs every complete frame c's Reader has, reading the socket
// for more if this readiness event has not been read yet (epoll.Once).
func (l *gearmanLoop) frames(c *gearmanConn) {
	if c.engine != nil {
		l.engineUsed = true
	}
	for {
		f, err := c.rd.ReadFrame()
		if err == epoll.ErrWouldBlock {
			c.watch.setFlag(watchPartial, c.rd.Buffered() > 0)
			if c.flusher != nil {
				c.flusher.queueFlushes(l.deferFlush)
				l.throttle(c) // gearman_loop_upstream_linux.go
			}
			return
		}
		if err != nil {
			if c.passOversized(err, &f) {
				err = nil
			} else {
				if c.srv.metrics != nil {
					c.countProtocolError(err)
				}
				if c.srv.cfg.Tracer != nil {
					c.traceRefused(err, &f)
				}
				if !c.protocolError(err) {
					l.close(c)
					return
				}
				continue
			}
		}
		switch f.Kind {
		case codec.KindPacket:
			err = c.handlePacket(&f.Packet)
		case codec.KindText:
			err = c.handleText(f.Text)
		}
		suspended := err == errSuspended // gearman_gateway_loop.go
		if suspended {
			err = nil
			l.suspend(c)
			c.held = f.Packet.Type // counted once handled (upstreamWork)
		}
		if c.srv.metrics != nil && !suspended {
			c.countFrame(&f, err)
		}
		if err != nil || c.closeReq.Load() {
			l.close(c)
			return
		}
		if c.paused {
			return
		}
	}
}

// close ends a loop connection: its session closes (which may queue
// packets for others), its last replies get one write, and the socket is
// closed.
func (l *gearmanLoop) close(c *gearmanConn) {
	if c.closed {
		return
	}
	c.closed = true
	c.sess.Close()
	c.mu.Lock()
	if !c.dead && len(c.out) > 0 {
		epoll.Write(c.fd, c.out)
	}
	c.dead = true
	c.out = nil
	c.mu.Unlock()
	l.poll.Del(c.fd)
	syscall.Close(c.fd)
	c.nc.Close() // frees its slot under the connection limits
	l.slots.remove(c.slot, c)
	l.srv.removeConn(c)
	l.srv.wg.Done()
}

// closeFD closes a loop connection's socket that never reached the loop.
func (c *gearmanConn) closeFD() {
	if c.fd >= 0 {
		syscall.Close(c.fd)
		c.fd = -1
	}
}

// loopOnce is a loop connection's read state: one read per readiness
// event.
type loopOnce = epoll.Once

// loopInput is a loop connection's socket as its Reader sees it: one read
// per readiness event (epoll.Once).
type loopInput struct{ c *gearmanConn }

// Read reads once from the socket.
func (r loopInput) Read(p []byte) (int, error) { return r.c.once.Read(r.c.fd, p) }
