package proxy

import (
	"errors"
	"sync"
	"sync/atomic"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/routing"
)

// gwSession is one client connection of a gateway: the gearmanHandler
// that routes its requests to backend sessions, opened lazily, one per
// backend (DESIGN decision 2), and puts the answers back in request order.
//
// Request order (DESIGN decision 4): every request that gets a reply has a
// gwReply in fifo, in the client's order, and, if a backend answers it, in
// that backend's pending list, in the order it was sent there. A reply
// packet from a backend fills the first entry of its pending list; the head
// of fifo is written as soon as it is filled. Async packets (NOOP, WORK_*)
// are written at once.
//
// Goroutines: Handle, HandleText and flushBackends run on the
// connection's read loop, or, for a connection on the event loop, on the
// loop goroutine, except a request handled off the loop (handleOffLoop,
// grabOffLoop: gearman_gateway_loop.go). deliver and lost run on an
// upstream session's reader goroutine or, for a loop session, on the loop
// goroutine; for the local engine deliver runs on whichever goroutine the
// engine emits from. Actions that must call into a backend after a packet
// arrived (a GRAB_JOB moving on after NO_JOB) are queued in actions and
// run by the goroutine that delivered, with no lock held.
//
// Lock order: an opening lock, then gwBackend.sendMu, then the engine's lock, then
// gwLocal.mu, then mu, then gwOwnSessions.mu (join) or the connection's
// locks (gearmanConn.mu, ...).
// mu is never held while calling into a backend.
type gwSession struct {
	gw    *gearmanGateway
	c     *gearmanConn
	local *gwBackend // the local engine's session, open for the whole connection
	// info is the client's fd and host, as "workers" lists them.
	info gearman.SessionInfo

	flushBuf []*gwBackend // owned by the read loop (flushBackends)
	pin      *gwRouting   // owned by the request's handler: its routing (Handle)

	mu         sync.Mutex
	fifo       replyQueue            // guarded by mu: replies owed to the client, in request order
	backends   []*gwBackend          // guarded by mu: open upstream sessions
	abilities  map[string]*gwAbility // guarded by mu: registered functions
	workerSet  []*routing.Backend    // guarded by mu: backends of the abilities, deduplicated
	clientID   []byte                // guarded by mu: SET_CLIENT_ID, replayed on new sessions
	exceptions bool                  // guarded by mu: OPTION_REQ exceptions, replayed likewise
	sleeping   bool                  // guarded by mu: PRE_SLEEP and no NOOP or GRAB since
	closed     bool                  // guarded by mu
	joined     bool                  // guarded by mu: in gw.own (gwOwnSessions.join)
	actions    []func()              // guarded by mu: to run with no lock held
	grabNext   int                   // guarded by mu: rotates the first backend a GRAB tries
	scratch    [codec.MaxArgs][]byte // guarded by mu: args of rewritten packets
	traced     map[string]struct{}   // guarded by mu: client handles of traced jobs this worker holds
	// handleBuf, guarded by mu, holds a handle rewritten for the client.
	handleBuf [routing.MaxHandleLen + 1]byte
	// fwd and fwdArgs hold a request with its handle rewritten for a
	// backend (rehandled); only the request being handled uses them.
	fwd     codec.Packet
	fwdArgs [codec.MaxArgs][]byte
	// fast, owned by the request's handler, is the submit fast path's
	// cached route (gearman_gateway_fast.go).
	fast gwFastRoute
	free []*gwReply // guarded by mu: written fastSubmit replies, for reuse

	// Submits on shared lines (gearman_gateway_bgline.go,
	// gearman_gateway_fgline.go).
	lines    []*gwLine     // guarded by mu: the lines s sent on
	lineOut  int           // guarded by mu: its submits on them not answered
	lineJobs int           // guarded by mu: its foreground jobs on them not finished
	lineIdle chan struct{} // guarded by mu: closed when lineOut drops to 0 (waitLines)
	lineSlot int           // which of the loop's lines to a backend s uses

	// openErr, guarded by mu, holds the dials that failed for a request
	// handled off the event loop (gearman_gateway_loop.go).
	openErr map[*routing.Backend]error
	// opening, guarded by mu, serialises opening a session per backend;
	// sessions on different backends open in parallel.
	opening map[*routing.Backend]*sync.Mutex
}

// gwBackend is one backend session of a gwSession.
type gwBackend struct {
	b     *routing.Backend
	conn  routing.GearmanConn // upstream; nil for the local engine
	local *gwLocal            // the local engine; nil for an upstream

	sendMu sync.Mutex  // serialises sends, so pending matches the wire order
	dirty  atomic.Bool // sent since the last flush

	pending replyQueue // guarded by gwSession.mu: sent requests awaiting their reply
	// foreground holds the backend's handles of the foreground jobs
	// submitted on this session and not finished: if the session fails,
	// their clients get WORK_FAIL rather than wait forever on a
	// connection that stays open. Guarded by gwSession.mu.
	foreground map[string]struct{}
	dead       bool // guarded by gwSession.mu: the session failed or was closed
}

// gwAbility is one CAN_DO/CAN_DO_TIMEOUT, replayed on sessions opened later.
type gwAbility struct {
	timeout  []byte // CAN_DO_TIMEOUT's argument; nil for CAN_DO
	backends []*routing.Backend
}

// gwReply is one reply owed to the client.
type gwReply struct {
	out     []byte // the encoded reply, once done
	done    bool
	discard bool // a request of the gateway's own (replayed OPTION_REQ): not in fifo
	fg      bool // a foreground SUBMIT_*: its JOB_CREATED starts a job to watch
	recycle bool // fastSubmit's: reused once written (gearman_gateway_fast.go)
	// parent, when not nil, is the GET_STATUS_UNIQUE this reply is one
	// backend's part of; need counts the parts a parent still waits for
	// and known says its out is a known job's status.
	parent *gwReply
	need   int
	known  bool
	grab   *gwGrab     // a GRAB_JOB* still looking for a job
	trace  *gwJobTrace // nil unless traced (gearman_gateway_trace.go)
}

// gwGrabReply is a GRAB_JOB*'s reply with its state, in one allocation
// (room for the backends of most workers included).
type gwGrabReply struct {
	r    gwReply
	g    gwGrab
	left [4]*routing.Backend
}

// newGrabReply returns the reply of a GRAB_JOB* of type t to be tried on
// n backends.
func newGrabReply(t codec.Type, n int) *gwReply {
	gr := &gwGrabReply{}
	gr.g = gwGrab{typ: t, left: gr.left[:0]}
	if n > len(gr.left) {
		gr.g.left = make([]*routing.Backend, 0, n)
	}
	gr.r.grab = &gr.g
	return &gr.r
}

// The requests and reply the gateway sends for GRAB_JOB*s, never changed:
// backends do not keep or modify what they are sent, and flushFIFOLocked
// only reads a reply's bytes.
var (
	grabRequests = [...]codec.Packet{
		{Magic: codec.Req, Type: codec.GrabJob},
		{Magic: codec.Req, Type: codec.GrabJobUniq},
		{Magic: codec.Req, Type: codec.GrabJobAll},
	}
	noJobReply = codec.AppendPacket(nil, codec.Res, codec.NoJob)
)

// grabRequest returns the request of GRAB_JOB* type t.
func grabRequest(t codec.Type) *codec.Packet {
	switch t {
	case codec.GrabJobUniq:
		return &grabRequests[1]
	case codec.GrabJobAll:
		return &grabRequests[2]
	}
	return &grabRequests[0]
}

// gwGrab is the state of a GRAB_JOB* across the worker's backends.
type gwGrab struct {
	typ  codec.Type
	left []*routing.Backend // backends not tried yet
}

func (gw *gearmanGateway) newSession(info gearman.SessionInfo, c *gearmanConn) *gwSession {
	s := &gwSession{gw: gw, c: c, abilities: map[string]*gwAbility{}}
	s.lineSlot = int(gw.sessions.Add(1) % gwLinesPer)
	lb := &gwBackend{b: gw.rt().localBackend()}
	lb.local = &gwLocal{deliver: func(p *codec.Packet) { s.deliver(lb, p) }}
	lb.local.sess = gw.srv.engine.NewSession(info, lb.local)
	s.local, s.info = lb, info
	return s
}

// localBackend is the handle map's backend 0.
func (gw *gwRouting) localBackend() *routing.Backend {
	b, _ := gw.cfg.Handles.Decode([]byte("H:local:1"))
	return b
}

// Close ends every backend session.
func (s *gwSession) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	open := s.backends
	s.backends = nil
	for _, bs := range open {
		bs.dead = true
	}
	if s.lineIdle != nil {
		close(s.lineIdle)
		s.lineIdle = nil
	}
	s.mu.Unlock()
	s.gw.own.leave(s)
	s.leaveLines()
	if s.gw.trace != nil {
		s.gw.trace.closed(s)
	}
	for _, bs := range open {
		bs.conn.Close()
	}
	s.local.sendMu.Lock()
	s.local.local.sess.Close()
	s.local.sendMu.Unlock()
}

// flushBackends writes what was sent to upstream sessions since the last
// flush: the read loop has handled every buffered request.
func (s *gwSession) flushBackends() { s.queueFlushes(nil) }

// queueFlushes is flushBackends, with the sessions an event loop serves
// handed to later (when not nil) to write with its batch.
func (s *gwSession) queueFlushes(later func(routing.LoopSession)) {
	var lineStack [4]*gwLine
	s.mu.Lock()
	open := append(s.flushBuf[:0], s.backends...)
	lines := append(lineStack[:0], s.lines...)
	s.mu.Unlock()
	for i, bs := range open {
		if bs.dirty.Swap(false) {
			if ls, ok := bs.conn.(routing.LoopSession); ok && later != nil {
				later(ls)
			} else {
				_ = bs.conn.Flush() // a failure ends the session: lost reports it
			}
		}
		open[i] = nil
	}
	s.flushBuf = open[:0]
	queueLineFlushes(lines, later)
}

// session returns the open session on b, opening it (and replaying the
// connection's client id, options and abilities on it) if needed.
func (s *gwSession) session(b *routing.Backend) (*gwBackend, error) {
	return s.sessionDial(b, s.c.loop == nil)
}

// sessionDial is session; dial false (on the event loop) returns
// errNotOpen, or the error preopen got, rather than dial.
func (s *gwSession) sessionDial(b *routing.Backend, dial bool) (*gwBackend, error) {
	if b.ID == routing.LocalID {
		return s.local, nil
	}
	if !dial {
		s.mu.Lock()
		defer s.mu.Unlock()
		if bs := s.findLocked(b); bs != nil {
			return bs, nil
		}
		return nil, s.notOpenLocked(b)
	}
	if bs := s.find(b); bs != nil {
		return bs, nil
	}
	om := s.openLock(b)
	om.Lock()
	defer om.Unlock()
	if bs := s.find(b); bs != nil {
		return bs, nil
	}
	bs := &gwBackend{b: b}
	if err := s.openConn(b, bs); err != nil { // gearman_gateway_loop.go
		s.gw.srv.log.Debug("gearman gateway: open", "backend", b.Name, "err", err)
		return nil, err
	}
	conn := bs.conn
	// Publish the session and take the state to replay in one critical
	// section: a CAN_DO, SET_CLIENT_ID or OPTION_REQ handled before it is
	// replayed here, one handled after it finds the session and sends
	// itself. sendMu, held until the replay is written, keeps every other
	// request behind the replay on the wire.
	bs.sendMu.Lock()
	defer bs.sendMu.Unlock()
	s.mu.Lock()
	if s.closed || bs.dead {
		s.mu.Unlock()
		conn.Close()
		return nil, routing.ErrClosed
	}
	s.backends = append(s.backends, bs)
	s.gw.own.join(s) // the merged "workers" listing knows it
	var replay []*codec.Packet
	if s.clientID != nil {
		replay = append(replay, &codec.Packet{Magic: codec.Req, Type: codec.SetClientID, Args: [][]byte{s.clientID}})
	}
	if s.exceptions {
		replay = append(replay, &codec.Packet{Magic: codec.Req, Type: codec.OptionReq, Args: [][]byte{[]byte("exceptions")}})
		bs.pending.push(&gwReply{discard: true})
	}
	for fn, a := range s.abilities {
		for _, ab := range a.backends {
			if ab == b {
				replay = append(replay, canDo([]byte(fn), a.timeout))
			}
		}
	}
	s.mu.Unlock()
	for _, p := range replay {
		// A failure ends the session; its reader reports it (lost).
		if conn.Send(p) != nil {
			break
		}
	}
	bs.dirty.Store(len(replay) > 0)
	return bs, nil
}

// openLock returns the lock that serialises opening sessions on b.
func (s *gwSession) openLock(b *routing.Backend) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opening == nil {
		s.opening = map[*routing.Backend]*sync.Mutex{}
	}
	m := s.opening[b]
	if m == nil {
		m = &sync.Mutex{}
		s.opening[b] = m
	}
	return m
}

// find returns the live session on b, or nil.
func (s *gwSession) find(b *routing.Backend) *gwBackend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.findLocked(b)
}

func (s *gwSession) findLocked(b *routing.Backend) *gwBackend {
	for _, bs := range s.backends {
		if bs.b == b && !bs.dead {
			return bs
		}
	}
	return nil
}

func canDo(fn, timeout []byte) *codec.Packet {
	if timeout != nil {
		return &codec.Packet{Magic: codec.Req, Type: codec.CanDoTimeout, Args: [][]byte{fn, timeout}}
	}
	return &codec.Packet{Magic: codec.Req, Type: codec.CanDo, Args: [][]byte{fn}}
}

// send sends p on bs; r, when not nil, is the reply it owes (already in
// fifo unless discard). A session that is gone answers r at once. The
// error is the local engine's, which closes the client connection.
func (s *gwSession) send(bs *gwBackend, p *codec.Packet, r *gwReply) error {
	bs.sendMu.Lock()
	if r != nil {
		s.mu.Lock()
		if bs.dead {
			s.failLocked(bs.b, r, "session closed")
			s.flushFIFOLocked()
			s.mu.Unlock()
			bs.sendMu.Unlock()
			return nil
		}
		bs.pending.push(r)
		s.mu.Unlock()
	}
	var err error
	if bs.local != nil {
		// Not after Close: the engine session would take requests (a
		// CAN_DO, a submit) for a connection that is gone. A request
		// handled off the event loop, or a GRAB_JOB moving on, may come
		// late; Close waits on sendMu, so one checked here is safe.
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			err = bs.local.Send(p)
		}
		bs.sendMu.Unlock()
		return err
	}
	err = bs.conn.Send(p)
	bs.sendMu.Unlock()
	s.sent(bs, r, err)
	return nil
}

// sent finishes sending to an upstream session whose Send returned err;
// r is the reply the request owes, or nil.
func (s *gwSession) sent(bs *gwBackend, r *gwReply, err error) {
	switch {
	case err == nil:
		bs.dirty.Store(true)
	case errors.Is(err, codec.ErrInvalidPacket):
		// Nothing was sent: answer r here rather than never.
		s.mu.Lock()
		if bs.pending.remove(r) {
			s.failLocked(bs.b, r, err.Error())
		}
		s.flushFIFOLocked()
		s.mu.Unlock()
	case routing.IsTransport(err):
		// The session failed itself and reports it (Closed, which the
		// breaker counts): answer its requests now, but do not Close it,
		// which would silence that report.
		s.forget(bs, err)
	default:
		s.lost(bs, err)
	}
}

// failLocked answers r for a backend session that failed: a GRAB_JOB moves
// on to the next backend, anything else gets an ERROR packet.
func (s *gwSession) failLocked(b *routing.Backend, r *gwReply, why string) {
	switch {
	case r.discard:
	case r.grab != nil:
		s.actions = append(s.actions, func() { s.tryGrab(r) })
	case r.parent != nil:
		s.partLocked(r, nil)
	default:
		r.out = codec.AppendPacket(nil, codec.Res, codec.Error, []byte(codec.CodeQueueError),
			[]byte("jobgate: backend "+b.Name+" failed: "+why))
		r.done = true
		if r.trace != nil {
			r.trace.send.Fail("backend_unavailable")
		}
	}
}

// lost ends a backend session that failed: its pending requests are
// answered (failLocked) and the next request reopens it.
func (s *gwSession) lost(bs *gwBackend, err error) {
	if s.forget(bs, err) && bs.conn != nil {
		bs.conn.Close()
	}
}

// forget is lost without closing the session; false if it was gone.
func (s *gwSession) forget(bs *gwBackend, err error) bool {
	s.mu.Lock()
	if bs.dead {
		s.mu.Unlock()
		return false
	}
	bs.dead = true
	if i := indexBackend(s.backends, bs); i >= 0 {
		s.backends = append(s.backends[:i], s.backends[i+1:]...)
	}
	why := "connection lost"
	if err != nil {
		why = err.Error()
	}
	for _, r := range bs.pending.all() {
		s.failLocked(bs.b, r, why)
	}
	bs.pending.reset()
	for h := range bs.foreground {
		s.writeLocked(bs.b, &codec.Packet{Magic: codec.Res, Type: codec.WorkFail, Args: [][]byte{[]byte(h)}})
	}
	bs.foreground = nil
	// A sleeping worker registered there is woken, so that its next
	// GRAB_JOB reopens the session and registers it again.
	if s.sleeping && s.usesLocked(bs.b) {
		s.sleeping = false
		s.c.WritePacket(&codec.Packet{Magic: codec.Res, Type: codec.Noop})
	}
	s.flushFIFOLocked()
	s.mu.Unlock()
	s.gw.srv.log.Debug("gearman gateway: backend session lost", "backend", bs.b.Name, "err", err)
	return true
}

func indexBackend(bss []*gwBackend, bs *gwBackend) int {
	for i, x := range bss {
		if x == bs {
			return i
		}
	}
	return -1
}

// usesLocked reports whether the worker has abilities on b.
func (s *gwSession) usesLocked(b *routing.Backend) bool {
	for _, x := range s.workerSet {
		if x == b {
			return true
		}
	}
	return false
}
