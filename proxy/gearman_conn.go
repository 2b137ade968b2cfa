package proxy

import (
	"errors"
	"github.com/jobgate/jobgate/routing"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy/connlimit"
)

// gearmanConn is one Gearman connection. On Linux a TCP connection is
// served by the server's epoll event loop (gearman_loop_linux.go), which
// reads, runs and writes every connection from one goroutine; the rest of
// this comment describes the other mode (GearmanConfig.Goroutines, other
// platforms, other kinds of net.Conn): a read loop that feeds the engine
// session and a writer that sends what other connections cause.
//
// Output path: the engine calls WritePacket/WriteText (with its lock held,
// from any goroutine), which append encoded bytes to out. The read loop
// flushes its own replies when it has handled all buffered input and must
// wait for more (inputReader), so a burst of requests gets one write.
// Packets that another connection's request queued for this one while its
// read loop waits are written by that other read loop before it waits in
// turn (GearmanServer.flushDirty), or by this connection's writer goroutine
// when that could block. One writer per connection, never one per job.
//
// Lock order: the engine's lock, then gearmanConn.mu, then
// GearmanServer.dmu (markDirty is called after mu is released);
// gearmanConn.wmu before gearmanConn.mu. Nothing takes the engine's lock
// while holding a connection lock. A gateway session's locks
// (gwSession.mu) come after the engine's and before gearmanConn.mu: its
// upstream reader goroutines write here through WritePacket/WriteText,
// which never block (a connection over MaxOutput is closed instead), and
// then call GearmanServer.flushDirty.
type gearmanConn struct {
	srv  *GearmanServer
	nc   net.Conn
	raw  syscall.RawConn // for non-blocking writes by other goroutines; nil if unavailable
	sess gearmanHandler
	// engine is sess when it is the local engine's session (a plain
	// server), nil for a gateway session: see handlePacket.
	engine *gearman.Session

	// flusher, when not nil, is sess as a gateway session: told when the
	// read side has handled every buffered request, so that requests
	// queued for upstream servers go out in one write per batch.
	flusher gearmanFlusher
	// pkt is the gateway's copy of the packet being handled, a field so
	// that handing it to the session allocates nothing (handlePacket).
	pkt codec.Packet

	handling atomic.Bool   // the read loop is not waiting in Read: it will flush before it does
	wake     chan struct{} // cap 1: the writer should flush
	done     chan struct{} // closed when the read loop ends

	mu    sync.Mutex // guards out, spare, dead
	out   []byte     // encoded bytes waiting to be written
	spare []byte     // the other buffer, reused
	dead  bool       // output overflowed or a write failed

	wmu sync.Mutex // serialises writes to nc, so buffers go out in order

	// Set when the connection is served by the server's event loop
	// (gearman_loop_linux.go) instead of the two goroutines above; the
	// fields below are then owned by the loop goroutine, except closeReq.
	loop     *gearmanLoop
	fd       int           // the socket, taken over from nc
	slot     int32         // index in loop.conns and epoll id
	rd       *codec.Reader // reads fd, one read per readiness event
	once     loopOnce      // rd's reads: one per readiness event
	wbuf     []byte        // output taken for the loop's write (takeOut)
	writing  bool          // wbuf is out for a write
	op       int32         // that write's index in the loop's batch
	wantOut  bool          // EPOLLOUT is registered: output is waiting for room
	closed   bool          // closed by the loop
	paused   bool          // a request is handled off the loop: not in the poller, not read
	held     codec.Type    // the type of that request, counted in metrics once handled
	closeReq atomic.Bool   // any goroutine: the loop should close it

	auth  *connAuth // nil until a request arrives while auth is on (gearman_auth.go)
	watch connWatch // for the timeouts (limits.go)
}

// newGearmanConn sets up a connection, served by loop when it is not nil
// and can take the socket over, by its own goroutines otherwise.
func newGearmanConn(s *GearmanServer, nc net.Conn, loop *gearmanLoop) *gearmanConn {
	c := &gearmanConn{
		srv: s,
		nc:  nc,
		fd:  -1,
	}
	info := gearman.SessionInfo{FD: -1}
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		info.Host = ta.IP.String()
	} else if a := nc.RemoteAddr(); a != nil {
		info.Host = a.String()
	}
	if tc, ok := unwrapConn(nc).(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		if loop != nil && loop.adopt(c) {
			info.FD = c.fd
		} else if rc, err := tc.SyscallConn(); err == nil {
			c.raw = rc
			_ = rc.Control(func(fd uintptr) { info.FD = int(fd) })
		}
	} else {
		info.FD = tlsSocketFD(nc) // conn_fd.go
	}
	if c.loop == nil {
		c.wake = make(chan struct{}, 1)
		c.done = make(chan struct{})
	}
	c.handling.Store(true) // nothing to flush before the first read
	if s.gw != nil {
		gs := s.gw.newSession(info, c)
		c.sess, c.flusher = gs, gs
	} else {
		c.engine = s.engine.NewSession(info, c)
		c.sess = c.engine
		if c.loop != nil {
			c.engine.SetLoopWrites() // the loop's housekeep calls WriteQueued
		}
	}
	return c
}

// handlePacket hands one decoded packet to the session. The engine's
// session is called directly rather than through gearmanHandler: a pointer
// passed to an interface method escapes, so every frame of the read loop
// would be moved to the heap, an allocation per packet on the plain
// server's fast path. The gateway path copies the packet header into the
// connection (handlers do not keep p) instead.
func (c *gearmanConn) handlePacket(p *codec.Packet) error {
	c.watch.frames.Add(1)
	if statusKeyTooLong(p, c.srv.cfg.Limits) { // gearman_status_close.go
		return errStatusKeyTooLong
	}
	if c.authOn() || p.Type == codec.OptionReq || p.Type == codec.SetClientID {
		if done, err := c.authorizePacket(p); done {
			return err
		}
	}
	if c.limitPacket(p.Type) {
		return nil
	}
	if c.engine != nil {
		if c.srv.trace != nil {
			return c.handleTraced(p)
		}
		return c.engine.Handle(p)
	}
	c.pkt = *p
	return c.sess.Handle(&c.pkt)
}

// gearmanHandler is what a connection hands its decoded frames to: the
// local engine's *gearman.Session for a plain server, a gateway session
// (gearman_gateway_session.go) when upstream servers are configured. The
// contract is the engine Session's: a non-nil error closes the connection,
// output goes to the gearman.Output the handler was made with, and Close
// is idempotent.
type gearmanHandler interface {
	Handle(p *codec.Packet) error
	HandleText(line []byte) error
	Close()
}

// gearmanFlusher is implemented by handlers that buffer requests for other
// servers; flushBackends is called when no more input is buffered.
// queueFlushes is flushBackends on the event loop: the sessions the loop
// serves are handed to later, to be written with the loop's batch, and the
// others are flushed at once.
type gearmanFlusher interface {
	flushBackends()
	queueFlushes(later func(routing.LoopSession))
}

var _ gearmanHandler = (*gearman.Session)(nil)

// WritePacket encodes p into the output buffer (gearman.Output).
func (c *gearmanConn) WritePacket(p *codec.Packet) {
	c.mu.Lock()
	wasEmpty := len(c.out) == 0
	c.out = codec.AppendPacket(c.out, p.Magic, p.Type, p.Args...)
	c.queued(wasEmpty)
}

// WriteText appends admin text to the output buffer (gearman.Output).
func (c *gearmanConn) WriteText(b []byte) {
	c.mu.Lock()
	wasEmpty := len(c.out) == 0
	c.out = append(c.out, b...)
	c.queued(wasEmpty)
}

// queued finishes an append made under c.mu: it unlocks, closes a slow
// consumer, and wakes the writer unless the read loop will flush anyway.
func (c *gearmanConn) queued(wasEmpty bool) {
	over := len(c.out) > c.srv.maxOutput() && !c.dead
	if over {
		c.dead = true
		c.out = c.out[:0]
	}
	c.mu.Unlock()
	if c.loop != nil {
		// The loop writes after its batch, whoever queued the bytes.
		if over {
			c.srv.countCut(connlimit.ReasonSlowReader)
			c.closeReq.Store(true)
		}
		if wasEmpty || over {
			c.loop.markDirty(c)
		}
		return
	}
	if over {
		c.srv.countCut(connlimit.ReasonSlowReader)
		c.nc.Close()
		return
	}
	if wasEmpty && !c.handling.Load() {
		c.srv.markDirty(c)
	}
}

// close asks for the connection to be closed, from any goroutine.
func (c *gearmanConn) close() {
	if c.loop != nil {
		c.closeReq.Store(true)
		c.loop.markDirty(c)
		c.loop.kick()
		return
	}
	c.nc.Close()
}

// wakeWriter hands the flush to the connection's writer goroutine.
func (c *gearmanConn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// flushForeign writes c's pending output from another connection's
// goroutine, saving a writer wakeup. It never waits for c's peer: when a
// write is in progress, when much is pending or when the socket does not
// take everything at once, c's writer goroutine does the rest.
func (c *gearmanConn) flushForeign() {
	c.mu.Lock()
	small := len(c.out) <= foreignFlushMax
	c.mu.Unlock()
	if !small || c.raw == nil || !c.wmu.TryLock() {
		c.wakeWriter()
		return
	}
	c.flushLocked(true)
	c.wmu.Unlock()
}

// foreignFlushMax bounds what another connection's goroutine writes for a
// connection; more is left to the connection's own writer.
const foreignFlushMax = 16 << 10

// flush writes everything queued so far.
func (c *gearmanConn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.flushLocked(false)
}

// flushLocked does flush's work with c.wmu held. A foreign write (made by
// another connection's goroutine) does not wait: what the socket does not
// take goes back to the buffer for c's writer goroutine.
func (c *gearmanConn) flushLocked(foreign bool) error {
	c.mu.Lock()
	buf := c.out
	c.out = c.spare[:0]
	c.spare = nil
	dead := c.dead
	c.mu.Unlock()
	if len(buf) == 0 || dead {
		return nil
	}
	var n int
	var err error
	if foreign {
		n, err = c.writeNow(buf)
		if err == nil && n < len(buf) {
			// The socket is full: put the rest back, ahead of anything
			// queued since, for the writer goroutine.
			c.mu.Lock()
			rest := make([]byte, 0, len(buf)-n+len(c.out))
			c.out = append(append(rest, buf[n:]...), c.out...)
			c.mu.Unlock()
			c.wakeWriter()
			return nil
		}
	} else {
		c.watch.setFlag(watchWriting, true)
		_, err = c.nc.Write(buf) // a short write comes with an error
		c.watch.setFlag(watchWriting, false)
		c.watch.wrote.Add(1)
	}
	if cap(buf) <= 1<<20 { // keep ordinary buffers, drop huge ones
		c.mu.Lock()
		c.spare = buf[:0]
		c.mu.Unlock()
	}
	if err != nil {
		c.mu.Lock()
		c.dead = true
		c.mu.Unlock()
		c.nc.Close()
	}
	return err
}

// writeLoop flushes on request: output another goroutine could not write
// without risking a wait on this connection's peer.
func (c *gearmanConn) writeLoop() {
	defer c.srv.wg.Done()
	for {
		select {
		case <-c.wake:
			if c.flush() != nil {
				<-c.done
				return
			}
		case <-c.done:
			return
		}
	}
}

// readLoop reads frames and hands them to the session. Replies are
// flushed by inputReader when the Reader needs more input, that is when
// everything buffered has been handled.
func (c *gearmanConn) readLoop() {
	defer c.srv.wg.Done()
	defer close(c.done)
	defer c.srv.removeConn(c)
	defer c.nc.Close()
	defer c.srv.flushDirty() // what closing the session sent others
	defer c.sess.Close()
	r := codec.NewReader(inputReader{c}, c.srv.cfg.Limits)
	c.rd = r // for inputReader's read timeout check
	for {
		f, err := r.ReadFrame()
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
					c.flush()
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
		if c.srv.metrics != nil {
			c.countFrame(&f, err)
		}
		if err != nil {
			c.flush()
			return
		}
	}
}

// inputReader is the connection as the codec Reader sees it. The Reader
// reads only when it has no complete frame buffered, so a read is where
// the loop would wait for the peer: first write what is pending, this
// connection's replies and what its requests queued for idle connections.
type inputReader struct{ c *gearmanConn }

// Read flushes, then reads from the connection.
func (r inputReader) Read(p []byte) (int, error) {
	c := r.c
	if c.flusher != nil {
		c.flusher.flushBackends()
	}
	c.handling.Store(false)
	if err := c.flush(); err != nil {
		return 0, err
	}
	c.srv.flushDirty()
	c.watch.setFlag(watchPartial, c.rd.Buffered() > 0)
	n, err := c.nc.Read(p)
	c.handling.Store(true)
	return n, err
}

// passOversized reports whether a request the Reader flagged for an
// over-long handle or unique ID should go on to handlePacket anyway, which
// answers as gearmand does: no job has such a handle or unique ID, so
// WORK_* get JOB_NOT_FOUND, and GET_STATUS/GET_STATUS_UNIQUE close the
// connection (statusKeyTooLong). WORK_FAIL and SUBMIT_* keep the Reader's
// ARGUMENT_TOO_LARGE, which is gearmand's answer for them.
func (c *gearmanConn) passOversized(err error, f *codec.Frame) bool {
	if f.Kind != codec.KindPacket || !(errors.Is(err, codec.ErrHandleTooLong) || errors.Is(err, codec.ErrUniqueTooLong)) {
		return false
	}
	switch f.Packet.Type {
	case codec.WorkComplete, codec.WorkStatus, codec.WorkData, codec.WorkWarning, codec.WorkException,
		codec.GetStatus, codec.GetStatusUnique:
		return true
	}
	return false
}

// protocolError answers a malformed frame the way gearmand does and reports
// whether the connection goes on. gearmand closes the connection on an
// unknown packet type (except the unused type 5, which gets ERROR), on too
// few arguments and on an over-long admin line.
func (c *gearmanConn) protocolError(err error) bool {
	var pe *codec.ProtocolError
	if !errors.As(err, &pe) {
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.ErrUnexpectedEOF) {
			c.srv.log.Debug("gearman read", "remote", c.nc.RemoteAddr().String(), "err", err)
		}
		return false
	}
	switch {
	case pe.Fatal,
		errors.Is(pe, codec.ErrTooFewArgs),
		errors.Is(pe, codec.ErrLineTooLong),
		errors.Is(pe, codec.ErrUnknownType) && pe.Type != 5:
		return false
	}
	// In request order, behind the replies still owed (DESIGN decision 4):
	// a JOB_CREATED the journal holds, or an upstream's answer.
	code, text := []byte(pe.Code), []byte(pe.Text)
	switch s := c.sess.(type) {
	case *gearman.Session:
		s.Reply(gearman.OutcomeClientError, codec.Error, code, text)
	case *gwSession:
		s.answer(codec.Error, code, text)
	default:
		c.WritePacket(&codec.Packet{Magic: codec.Res, Type: codec.Error, Args: [][]byte{code, text}})
	}
	return true
}
