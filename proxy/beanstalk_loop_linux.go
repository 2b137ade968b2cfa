//go:build linux

package proxy

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/uring"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/proxy/connlimit"
)

// beanstalkLoop serves the plain TCP connections of a BeanstalkServer's
// direct engine path from one goroutine over epoll, as gearmanLoop does
// for Gearman (ARCHITECTURE.md says why: a goroutine per connection costs
// more in scheduler wakeups and EAGAIN reads than the protocol itself).
// It reads each ready socket once, runs every whole command through the
// connection's engine Session, and after the batch writes each connection
// that got replies with one write.
//
// A reserve that has to wait, a change waiting for the journal
// (engine.Session.ExecAsync), or a denied reserve that auth holds back,
// parks its connection: the commands pipelined behind it stay buffered
// (up to maxReadAhead) and are served in order after its reply. The
// session's notify callback, run under the engine lock, and the hold
// timer only queue the connection and wake the loop (signal), which then
// collects the answer. Reading goes on meanwhile, to notice a hang-up;
// once the read-ahead buffer is full reading stops, and a hang-up is
// noticed only when the reply is written, as on a connection goroutine.
//
// Ownership: the loop goroutine owns slots, dirty and every loop
// connection's fields but signaled and closeReq. Other goroutines (the
// engine's timers, the sweeper, Serve, Shutdown) reach it only through mu
// and the eventfd, which is signalled under mu and closed under mu once
// exited is set, so no late signal writes to a reused descriptor number.
// Lock order: engine lock, beanstalkLoop.mu.
type beanstalkLoop struct {
	srv  *BeanstalkServer
	poll *epoll.Poller
	wake *epoll.EventFD

	slots loopSlots[*bloopConn] // loop only
	dirty []*bloopConn          // loop only; connections with replies to write
	spare []*bloopConn          // loop only; dirty's other buffer
	evs   [256]syscall.EpollEvent
	reads [256]int32   // loop only; per event, its read's index in io, or -1
	io    *uring.Batch // loop only; a batch's reads, then its writes
	// execAsync, loop only: the batch ran ExecAsync, so the engine may
	// hold journal records for the loop to write (housekeep).
	execAsync bool

	mu       sync.Mutex
	adds     []*bloopConn // guarded by mu; accepted, not yet registered
	ready    []*bloopConn // guarded by mu; signalled: look at them
	readyBuf []*bloopConn // guarded by mu; ready's other buffer
	sleeping bool         // guarded by mu; the loop may be blocked in Wait
	stopping bool         // guarded by mu; Shutdown called
	exited   bool         // guarded by mu; the loop has closed everything

	adopted atomic.Int64 // connections taken over, for tests and debugging
}

// bloopConn is a Beanstalk connection served by the loop.
type bloopConn struct {
	c    *beanstalkConn
	l    *beanstalkLoop
	sess *engine.Session
	fd   int
	slot int32
	dec  *wire.Decoder
	ct   beanstalkConnTrace

	in  []byte // read, not yet decoded: in[ir:]
	ir  int
	out []byte // replies not yet written, but for the bodies in refs

	op       int32           // flush's: the write's index in l.io, or -1
	refs     []bloopRef      // large reply bodies queued by reference (beanstalk_loop_out_linux.go)
	refBytes int             // bytes of refs not yet written
	iov      []syscall.Iovec // writeOut's, kept between writes

	events  uint32 // the epoll events registered
	wantOut bool   // output is waiting for room: EPOLLOUT
	dirty   bool   // in l.dirty
	eof     bool   // the client closed its side
	dead    bool   // a write failed: close without writing
	closed  bool
	quit    bool // quit, or auth closes it: read no more, close once the replies are written

	// The command the connection is parked on.
	waiting  bool         // a reserve or a journaled change the engine answers later (notify)
	verb     wire.Verb    // the verb of that command
	pcmd     wire.Command // that command, for its trace; Tube and Body cleared
	held     bool         // a denied reserve held back by auth (holdDenied)
	hold     time.Duration
	heldR    wire.Reply
	timer    *time.Timer
	holdDone atomic.Bool

	signaled atomic.Bool // queued in l.ready
	closeReq atomic.Bool // the sweeper cut it off
}

// Buffer sizes of a loop connection.
const (
	// bloopReadMin is the least room a read is offered.
	bloopReadMin = 4096
	// bloopOutHigh stops serving a connection's commands while this much
	// of its output waits for the client to read, as a connection
	// goroutine stops reading while its write blocks; a smaller
	// write_buffer_limit lowers it (outHigh).
	bloopOutHigh = 256 << 10
	// bloopKeep is the largest buffer kept once empty; larger ones, grown
	// by a burst, are dropped.
	bloopKeep = 256 << 10
)

// startBeanstalkLoop opens the poller and starts the loop goroutine.
func startBeanstalkLoop(s *BeanstalkServer) (*beanstalkLoop, error) {
	p, w, err := epoll.NewWoken(wakeID)
	if err != nil {
		return nil, err
	}
	l := &beanstalkLoop{srv: s, poll: p, wake: w, io: uring.New()}
	s.wg.Add(1)
	go l.run()
	return l, nil
}

// serveOnLoop hands c to the event loop, starting it on first use; false
// leaves c to its own goroutine: a TLS connection, the Goroutines option,
// or a loop that cannot start. A gateway's connections go to the
// gateway's own loop (serveGatewayOnLoop). With a journal the loop runs commands with ExecAsync,
// which does not wait for a change to be durable; it waits only while
// the journal's queue for the disk is full (MaxPending).
func (s *BeanstalkServer) serveOnLoop(c *beanstalkConn) bool {
	if s.goroutines {
		return false
	}
	if s.gw != nil {
		return s.serveGatewayOnLoop(c)
	}
	s.mu.Lock()
	if s.loop == nil && !s.shutdown && !s.noLoop {
		l, err := startBeanstalkLoop(s)
		if err != nil {
			s.log.Warn("beanstalk event loop unavailable; serving with goroutines", "err", err)
			s.noLoop = true
		}
		s.loop = l
	}
	l := s.loop
	s.mu.Unlock()
	if l == nil || !l.adopt(c) {
		return false
	}
	l.add(c.loop)
	return true
}

// stopLoop makes the loop close every connection and end; called by
// Shutdown with s.mu held.
func (s *BeanstalkServer) stopLoop() {
	s.stopGatewayLoop()
	if l := s.loop; l != nil {
		l.mu.Lock()
		if !l.exited {
			l.stopping = true
			l.wake.Signal()
		}
		l.mu.Unlock()
	}
}

// deferHold makes a loop connection hold a denied reserve's reply for d
// without blocking the loop; false for a connection goroutine, which
// sleeps instead.
func (c *beanstalkConn) deferHold(d time.Duration) bool {
	if c.loop == nil {
		return false
	}
	c.loop.hold = d
	return true
}

// adopt takes c's socket out of the runtime's poller; false leaves it to
// a goroutine.
func (l *beanstalkLoop) adopt(c *beanstalkConn) bool {
	inner := unwrapConn(c.nc) // the limited wrapper is closed in close
	tc, ok := inner.(interface {
		syscall.Conn
		SetNoDelay(bool) error
	})
	if !ok {
		return false
	}
	tc.SetNoDelay(true) // replies are written deliberately; never delay them
	fd, err := epoll.DupConn(tc)
	if err != nil {
		return false
	}
	inner.Close() // the duplicate keeps the socket open, for the loop alone
	b := &bloopConn{c: c, l: l, fd: fd, dec: wire.NewDecoder(l.srv.limits)}
	b.dec.DirectMin = bloopDirectMin
	b.sess = l.srv.eng.NewSession(b.notify)
	c.loop = b
	l.adopted.Add(1)
	return true
}

// add hands a new loop connection to the loop goroutine.
func (l *beanstalkLoop) add(b *bloopConn) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		b.sess.Close()
		syscall.Close(b.fd)
		b.c.nc.Close()
		l.srv.dropConn(b.c)
		return
	}
	l.adds = append(l.adds, b)
	l.wake.Signal()
	l.mu.Unlock()
}

// notify is the session's callback, under the engine lock: the pending
// reserve has its answer.
func (b *bloopConn) notify() { b.l.signal(b) }

// signal queues b for the loop to look at, and wakes the loop unless it
// is running anyway (a notify from another connection's command on the
// loop needs no eventfd write).
func (l *beanstalkLoop) signal(b *bloopConn) {
	if b.signaled.Swap(true) {
		return
	}
	l.mu.Lock()
	if l.exited { // a late timer or notify: nobody would take it off
		l.mu.Unlock()
		return
	}
	l.ready = append(l.ready, b)
	if l.sleeping {
		l.wake.Signal() // under mu: the loop closes the eventfd under mu
	}
	l.mu.Unlock()
}

// run is the loop goroutine.
func (l *beanstalkLoop) run() {
	defer l.srv.wg.Done()
	for {
		// Never wait with journal records of ours unwritten: a flush can
		// serve commands too (write). What this finishes is signalled, so
		// the wait below does not block.
		l.writeJournal()
		l.mu.Lock()
		l.sleeping = len(l.ready) == 0 && len(l.adds) == 0 && !l.stopping
		timeout := -1
		if !l.sleeping {
			timeout = 0
		}
		l.mu.Unlock()
		n, err := l.poll.Wait(l.evs[:], timeout)
		if err != nil {
			l.srv.log.Error("beanstalk epoll", "err", err)
		}
		l.mu.Lock()
		l.sleeping = false
		l.mu.Unlock()
		l.readAll(n)
		for i := 0; i < n; i++ {
			ev := &l.evs[i]
			if ev.Fd == wakeID {
				l.wake.Drain()
				continue
			}
			if b := l.slots.items[ev.Fd]; b != nil {
				l.event(b, ev.Events, l.reads[i])
			}
		}
		if l.housekeep() {
			return
		}
	}
}

// readAll reads every socket of the first n events that reported input
// it reads, with one batch, and takes what each read brought; event then
// serves it.
func (l *beanstalkLoop) readAll(n int) {
	io := l.io
	io.Reset()
	for i := 0; i < n; i++ {
		ev := &l.evs[i]
		l.reads[i] = -1
		if ev.Fd == wakeID {
			continue
		}
		b := l.slots.items[ev.Fd]
		if b != nil && b.events&epoll.In != 0 && ev.Events&(epoll.In|epoll.Err) != 0 {
			l.reads[i] = int32(b.queueRead(io))
		}
	}
	io.Run()
	for i := 0; i < n; i++ {
		if k := l.reads[i]; k >= 0 {
			got, _ := io.Result(int(k))
			l.slots.items[l.evs[i].Fd].gotRead(got)
		}
	}
}

// event handles one readiness report of b's socket, whose read (at
// index read of l.io, or -1) readAll made.
func (l *beanstalkLoop) event(b *bloopConn, ev uint32, read int32) {
	if ev&epoll.Out != 0 {
		l.write(b)
	}
	if b.closed {
		return
	}
	if read >= 0 {
		n, err := l.io.Result(int(read))
		l.readDone(b, n, err)
		return
	}
	if ev&(syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
		// Not reading (parked with the read-ahead full, or the client
		// not reading its replies) and the socket is broken.
		b.dead = true
		l.close(b)
	}
}

// writeJournal writes the journal records of the changes the loop made
// since the last call (ExecAsync) on its own goroutine, when the journal
// can do that without an fsync, and finishes their commands
// (engine.Engine.WriteQueued); they must not wait for a later batch.
func (l *beanstalkLoop) writeJournal() {
	if l.execAsync {
		l.execAsync = false
		l.srv.eng.WriteQueued()
	}
}

// housekeep registers new connections, looks at the signalled ones,
// writes what the batch produced, and on shutdown closes everything; true
// when the loop must end.
func (l *beanstalkLoop) housekeep() bool {
	// Before taking the signalled connections: the commands whose records
	// this writes are finished, and their connections signalled, before it
	// returns, so their replies go out in this batch.
	l.writeJournal()
	l.mu.Lock()
	adds, ready := l.adds, l.ready
	l.adds = nil
	l.ready = l.readyBuf[:0]
	stopping := l.stopping
	l.mu.Unlock()
	for _, b := range adds {
		l.register(b)
	}
	for i, b := range ready {
		ready[i] = nil
		b.signaled.Store(false)
		l.resume(b)
	}
	// Commands the resumed connections ran: what this finishes is
	// signalled again, so the loop does not sleep before answering it.
	l.writeJournal()
	l.mu.Lock()
	l.readyBuf = ready[:0]
	l.mu.Unlock()
	l.flush()
	if !stopping {
		return false
	}
	for _, b := range l.slots.items {
		if b != nil {
			l.close(b)
		}
	}
	l.mu.Lock()
	l.exited = true
	adds = l.adds
	l.adds = nil
	l.mu.Unlock()
	for _, b := range adds {
		l.register(b)
		l.close(b)
	}
	l.poll.Close()
	l.io.Close()
	l.mu.Lock()
	l.wake.Close()
	l.mu.Unlock()
	return true
}

// register adds b to the poller and puts it under the timeouts.
func (l *beanstalkLoop) register(b *bloopConn) {
	b.slot = l.slots.add(b)
	b.events = epoll.In | epoll.Err
	if err := l.poll.Add(b.fd, b.events, b.slot); err != nil {
		l.srv.log.Debug("beanstalk epoll add", "err", err)
		b.dead = true
		l.close(b)
		return
	}
	l.srv.guard.watch(&b.c.watch, b.sess.Busy, func(connlimit.Reason) {
		b.closeReq.Store(true)
		l.signal(b)
	})
}

// resume looks at a signalled connection: cut off, a reserve answered, a
// hold over. Then it serves what is buffered behind.
func (l *beanstalkLoop) resume(b *bloopConn) {
	if b.closed {
		return
	}
	if b.closeReq.Load() {
		l.close(b)
		return
	}
	if b.waiting {
		if !l.collect(b) {
			return // not yet: a notify for a reply already collected
		}
	} else if b.held && b.holdDone.Load() {
		b.held = false
		b.timer = nil
		l.reply(b, b.verb, nil, &b.heldR)
	} else {
		return
	}
	l.serve(b)
}

// flush writes every connection that got output, all of them with one
// batch. A write that drains a stalled connection serves its next
// commands, which may mark it again.
func (l *beanstalkLoop) flush() {
	io := l.io
	for len(l.dirty) > 0 {
		batch := l.dirty
		l.dirty = l.spare[:0]
		io.Reset()
		for _, b := range batch {
			b.dirty = false
			if !b.closed && b.pending() > 0 {
				b.op = int32(b.queueOut(io))
			} else {
				b.op = -1
			}
		}
		io.Run()
		for i, b := range batch {
			batch[i] = nil
			if b.op >= 0 {
				n, err := io.Result(int(b.op))
				b.wroteOut(n)
				l.wrote(b, n, err)
			}
		}
		l.spare = batch[:0]
	}
}

// markDirty queues b's output for the end of the batch.
func (l *beanstalkLoop) markDirty(b *bloopConn) {
	if !b.dirty && !b.closed {
		b.dirty = true
		l.dirty = append(l.dirty, b)
	}
}

// write sends b's output with one non-blocking write; the rest waits for
// EPOLLOUT.
func (l *beanstalkLoop) write(b *bloopConn) {
	if b.closed || b.pending() == 0 {
		return
	}
	n, err := b.writeOut()
	l.wrote(b, n, err)
}

// wrote follows up a write of b's output that took n bytes: a failed one
// closes b, a slow reader is cut off, and b is served again or waits for
// room.
func (l *beanstalkLoop) wrote(b *bloopConn, n int, err error) {
	w := &b.c.watch
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
	w.setFlag(watchWriting, b.pending() > 0)
	if len(b.out) == 0 && cap(b.out) > bloopKeep {
		b.out = nil
	}
	b.wantOut = b.pending() > 0
	if !b.parked() && b.pending() < l.outHigh() {
		l.serve(b) // commands left waiting for room, or an end of input
		return
	}
	l.interest(b)
}

// parked reports whether b waits for a command's reply.
func (b *bloopConn) parked() bool { return b.waiting || b.held }

// interest registers the events b needs now: input unless it is parked
// with the read-ahead full, at end of input or after quit, or blocked on
// its output; output room while output waits.
func (l *beanstalkLoop) interest(b *bloopConn) {
	var ev uint32
	pending := len(b.in) - b.ir
	if !b.eof && !b.quit && b.pending() < l.outHigh() && (!b.parked() || pending < maxReadAhead) {
		ev = epoll.In | epoll.Err
	}
	if b.wantOut {
		ev |= epoll.Out
	}
	if ev != b.events && l.poll.Mod(b.fd, ev, b.slot) == nil {
		b.events = ev
	}
}

// close ends a loop connection: its session closes (a reserved job goes
// back to ready), its last replies get one write, and the socket closes.
// Only a cut-off, a broken socket or Shutdown closes with replies
// pending; quit and a hang-up wait until they are written (serve).
func (l *beanstalkLoop) close(b *bloopConn) {
	if b.closed {
		return
	}
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	if b.waiting && l.srv.trace != nil {
		l.srv.trace.unanswered(b.sess, &b.pcmd) // its reply is lost with the connection
	}
	b.sess.Close()
	if !b.dead && b.pending() > 0 {
		b.writeOut()
	}
	b.dropOut()
	b.in = nil
	l.srv.guard.unwatch(&b.c.watch)
	l.poll.Del(b.fd)
	syscall.Close(b.fd)
	b.c.nc.Close() // frees its slot under the connection limits
	l.slots.remove(b.slot, b)
	l.srv.dropConn(b.c)
}
