package proxy

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/routing/upstream"
)

// Background submits on a shared line. A SUBMIT_JOB_BG (or _HIGH_BG,
// _LOW_BG) leaves no state on the connection that sent it: gearmand
// answers JOB_CREATED and sends that connection nothing more about the
// job. So the event loop sends the background submits of all its client
// connections to a backend over a few shared upstream sessions, lines,
// rather than over each connection's own session (DESIGN decision 2 is
// about the state a session holds, and these hold none). Requests from many
// clients then reach gearmand in one write and are read in one read, and
// their JOB_CREATED come back the same way, where one session per client
// costs gearmand and the gateway a read, a write and a wake-up per submit.
// Foreground submits of clients without the exceptions option go on lines
// too; their results come back on the line, and the gateway hands them out
// by handle (gearman_gateway_fgline.go).
//
// A connection uses the line to a backend only while it has no session of
// its own there: a client that also asks for a status, sets the
// exceptions option or works there keeps everything on its own session,
// so its requests reach gearmand in the order it sent them. When it first
// needs its own session, the dial waits until its submits on the line are
// answered (waitLines), for the same reason.
//
// A line is opened off the loop like a session (preopen), carries the
// client id upstream.GearmanAdminClientID (the merged "workers" listing
// drops it), and fails like a session: every submit waiting on it gets
// ERROR QUEUE_ERROR, and the next one opens a new line. A client whose
// line has more than backlogHigh waiting is throttled like one whose own
// session has (backlogged).

// gwLineKey names a line: gwLinesPer per event loop and backend.
type gwLineKey struct {
	loop *gearmanLoop
	b    *routing.Backend
	slot int
}

// gwLinesPer is how many lines a loop opens to each backend; a session
// uses the one of its slot. With one, the submits in flight moved as one
// wave, gearmand and the gateway taking turns, and 16 pipelining clients
// got fewer jobs through than with a session each (docs/BENCHMARKS.md,
// "Background submits on shared lines"); two overlap.
const gwLinesPer = 2

// lineKey is the key of s's line to b.
func (s *gwSession) lineKey(b *routing.Backend) gwLineKey {
	return gwLineKey{s.c.loop, b, s.lineSlot}
}

// gwLines is a gateway's lines.
type gwLines struct {
	mu      sync.Mutex
	open    map[gwLineKey]*gwLine     // guarded by mu: live lines
	dialing map[gwLineKey]*gwLineDial // guarded by mu: dials in flight
}

// gwLineDial is a line's dial in flight; those who want the line while it
// runs wait for its result rather than dial again, so that a backend that
// does not answer costs each of them one dial timeout, not one each.
type gwLineDial struct {
	done chan struct{} // closed when l and err are set
	l    *gwLine
	err  error
}

// gwLine is one shared upstream session for background submits.
type gwLine struct {
	gw     *gearmanGateway
	key    gwLineKey
	conn   routing.GearmanLoopConn
	sendMu sync.Mutex  // serialises sends, so pending matches the wire order
	dirty  atomic.Bool // sent since the last flush

	mu      sync.Mutex
	pending []gwLineWait // guarded by mu: submits sent, oldest first, from head
	head    int          // guarded by mu
	dead    bool         // guarded by mu: failed, closed or retired
	retired bool         // guarded by mu: closes once idle (retire: a reload dropped its backend; leave)
	// jobs, guarded by mu, holds the foreground jobs submitted on the
	// line and not finished, by the backend's handle.
	jobs map[string]*gwLineJob
}

// gwLineWait is a submit on a line waiting for its reply.
type gwLineWait struct {
	s *gwSession
	r *gwReply
}

// isBackground reports whether SUBMIT_* type t is a background submit.
func isBackground(t codec.Type) bool {
	switch t {
	case codec.SubmitJobBg, codec.SubmitJobHighBg, codec.SubmitJobLowBg:
		return true
	}
	return false
}

// get returns the live line of k, or nil.
func (ls *gwLines) get(k gwLineKey) *gwLine {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.open[k]
}

// dial returns the live line of k, opening it if there is none. It
// blocks: call it off the loop.
func (ls *gwLines) dial(gw *gearmanGateway, k gwLineKey) (*gwLine, error) {
	ls.mu.Lock()
	if l := ls.open[k]; l != nil {
		ls.mu.Unlock()
		return l, nil
	}
	if d := ls.dialing[k]; d != nil {
		ls.mu.Unlock()
		<-d.done
		return d.l, d.err
	}
	if ls.dialing == nil {
		ls.dialing = map[gwLineKey]*gwLineDial{}
	}
	d := &gwLineDial{done: make(chan struct{})}
	ls.dialing[k] = d
	ls.mu.Unlock()
	d.l, d.err = ls.openLine(gw, k)
	ls.mu.Lock()
	delete(ls.dialing, k)
	ls.mu.Unlock()
	close(d.done)
	return d.l, d.err
}

// openLine dials a line for k and makes it k's live line.
func (ls *gwLines) openLine(gw *gearmanGateway, k gwLineKey) (*gwLine, error) {
	l := &gwLine{gw: gw, key: k}
	ctx, cancel := gw.openTimeout()
	defer cancel()
	conn, err := k.b.OpenGearmanLoop(ctx, routing.GearmanEvents{
		Packet: l.deliver,
		Closed: func(err error) { l.fail(err) },
	}, gw.srv.maxOutput)
	if err != nil {
		return nil, err
	}
	l.conn = conn
	_ = conn.Send(lineTag) // a failure ends the session: Closed reports it
	l.dirty.Store(true)
	ls.mu.Lock()
	if ls.open == nil {
		ls.open = map[gwLineKey]*gwLine{}
	}
	ls.open[k] = l
	ls.mu.Unlock()
	k.loop.attach(conn)
	return l, nil
}

// lineTag starts every line: the id the merged "workers" listing drops.
var lineTag = &codec.Packet{Magic: codec.Req, Type: codec.SetClientID,
	Args: [][]byte{[]byte(upstream.GearmanAdminClientID)}}

// remove forgets l, if it is still k's line.
func (ls *gwLines) remove(l *gwLine) {
	ls.mu.Lock()
	if ls.open[l.key] == l {
		delete(ls.open, l.key)
	}
	ls.mu.Unlock()
}

// retire closes the lines to backends that keep does not hold (a reload
// dropped or rebuilt them) once their submits are answered. They stay
// findable meanwhile: only a request routed by the configuration before
// the reload can name such a backend, and it must still find its line.
// One idle now closes after grace, by when such a request has been
// handled.
func (ls *gwLines) retire(keep func(b *routing.Backend) bool, grace time.Duration) {
	ls.mu.Lock()
	var gone []*gwLine
	for k, l := range ls.open {
		if !keep(k.b) {
			gone = append(gone, l)
		}
	}
	ls.mu.Unlock()
	for _, l := range gone {
		l.mu.Lock()
		l.retired = true
		l.mu.Unlock()
		time.AfterFunc(grace, l.closeIfIdle)
	}
}

// gwLineRetireGrace is how long a retired line of the routing before a
// reload stays open when idle: a request routed by it may still be
// dialling (openTimeout) the backends it fails over to.
var gwLineRetireGrace = func(old *gwRouting) time.Duration { return 2*old.cfg.DialTimeout + time.Second }

// closeIfIdle closes l if no submit waits on it and no client on a
// foreground job submitted on it (idleLocked).
func (l *gwLine) closeIfIdle() {
	l.mu.Lock()
	idle := !l.dead && l.idleLocked()
	if idle {
		l.dead = true
	}
	l.mu.Unlock()
	if idle {
		l.gw.lines.remove(l)
		l.conn.Close()
	}
}

// wantsLine reports whether a background submit of s to b goes on a line
// (open or not): it may (lineable), and s has no session of its own on b.
func (s *gwSession) wantsLine(t codec.Type, b *routing.Backend) bool {
	return s.lineable(t, b) && s.find(b) == nil
}

// lineable reports whether a SUBMIT_* of type t to b may go on a line: s
// is on the event loop, b is an upstream, and t is a background submit or
// a foreground one of a client without the exceptions option (a line does
// not set it, and gearmand sends WORK_EXCEPTION only where it is set).
func (s *gwSession) lineable(t codec.Type, b *routing.Backend) bool {
	if s.c.loop == nil || b.ID == routing.LocalID || b.Gearman == nil {
		return false
	}
	if isForeground(t) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.exceptions
	}
	return isBackground(t)
}

// liveLine returns s's live line to b, or nil.
func (s *gwSession) liveLine(b *routing.Backend) *gwLine { return s.gw.lines.get(s.lineKey(b)) }

// sendLine sends SUBMIT_* p on line l; r, its reply, is in s.fifo already.
// raw, when not nil, is p's wire bytes. A line that is gone answers r with
// an ERROR at once.
func (s *gwSession) sendLine(l *gwLine, p *codec.Packet, r *gwReply, raw []byte) {
	l.sendMu.Lock()
	s.mu.Lock()
	s.lineOut++
	if !slices.Contains(s.lines, l) {
		s.lines = append(pruneLines(s.lines), l)
	}
	s.mu.Unlock()
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		l.sendMu.Unlock()
		s.lineAnswered(l, r, nil, "session closed")
		return
	}
	if l.head > 0 && len(l.pending) == cap(l.pending) && 2*l.head >= len(l.pending) {
		// Reuse the room the answered ones left, rather than grow
		// while submits never stop being in flight.
		n := copy(l.pending, l.pending[l.head:])
		clear(l.pending[n:])
		l.pending, l.head = l.pending[:n], 0
	}
	l.pending = append(l.pending, gwLineWait{s, r})
	l.mu.Unlock()
	var err error
	if rs, ok := l.conn.(gwRawSender); ok && raw != nil {
		err = rs.SendRaw(p, raw) // the bytes as they came: no encoding
	} else {
		err = l.conn.Send(p)
	}
	l.sendMu.Unlock()
	switch {
	case err == nil:
		l.dirty.Store(true)
	case errors.Is(err, codec.ErrInvalidPacket):
		// Nothing was sent: answer r here rather than never.
		if l.take(r) {
			s.lineAnswered(l, r, nil, err.Error())
		}
	case routing.IsTransport(err):
		// The session failed itself and reports it: Closed fails the
		// line, and r with it.
	default:
		l.fail(err)
		l.conn.Close()
	}
}

// take removes r's wait from l; false if it was not there.
func (l *gwLine) take(r *gwReply) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := l.head; i < len(l.pending); i++ {
		if l.pending[i].r == r {
			n := len(l.pending) - 1
			copy(l.pending[i:], l.pending[i+1:])
			l.pending[n] = gwLineWait{}
			l.pending = l.pending[:n]
			return true
		}
	}
	return false
}

// deliver takes one packet from the backend: the reply to the oldest
// submit waiting, or a foreground job's WORK_*. Runs on the loop goroutine.
func (l *gwLine) deliver(p *codec.Packet) {
	if isWorkResult(p.Type) {
		l.work(p)
		return
	}
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		return
	}
	if l.head == len(l.pending) || (p.Type != codec.JobCreated && p.Type != codec.Error) {
		// Not a reply to a submit: the line is out of step with the
		// backend, and the replies after it cannot be matched.
		l.mu.Unlock()
		l.fail(errors.New("unexpected " + p.Type.String() + " from the backend"))
		l.conn.Close()
		return
	}
	w := l.pending[l.head]
	l.pending[l.head] = gwLineWait{}
	l.head++
	if l.head == len(l.pending) {
		l.pending, l.head = l.pending[:0], 0
	}
	if w.r.fg && p.Type == codec.JobCreated {
		l.attachLocked(string(p.Args[0]), w.s)
	}
	retiredIdle := l.retired && l.idleLocked()
	l.mu.Unlock()
	w.s.lineAnswered(l, w.r, p, "")
	if retiredIdle {
		l.closeIfIdle()
	}
}

// fail ends l: each submit waiting gets ERROR QUEUE_ERROR, and the next
// background submit opens a new line. Only the first call does anything.
func (l *gwLine) fail(err error) {
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		return
	}
	l.dead = true
	waits := l.pending[l.head:]
	l.pending, l.head = nil, 0
	jobs := l.jobs
	l.jobs = nil
	l.mu.Unlock()
	l.gw.lines.remove(l)
	why := "connection lost"
	if err != nil {
		why = err.Error()
	}
	for _, w := range waits {
		w.s.lineAnswered(l, w.r, nil, why)
	}
	failLineJobs(l, jobs)
	l.gw.srv.log.Debug("gearman gateway: line lost", "backend", l.key.b.Name, "err", err)
}

// lineAnswered fills r with p, the backend's reply, or, when p is nil,
// with the ERROR of a line that failed for why.
func (s *gwSession) lineAnswered(l *gwLine, r *gwReply, p *codec.Packet, why string) {
	s.mu.Lock()
	s.lineOut--
	if s.lineOut == 0 && s.lineIdle != nil {
		close(s.lineIdle)
		s.lineIdle = nil
	}
	left := false
	switch {
	case p == nil:
		s.failLocked(l.key.b, r, why)
	case s.closed:
		r.done = true
		// A foreground job now attached to the line for a client gone.
		left = r.fg && p.Type == codec.JobCreated
	default:
		if r.fg && p.Type == codec.JobCreated {
			s.lineJobs++
		}
		if r.trace == nil && s.fifo.len() > 0 && s.fifo.front() == r {
			s.writeLocked(l.key.b, p) // next in request order: written now
		} else {
			r.out = s.encodeLocked(nil, l.key.b, p)
		}
		if s.gw.trace != nil {
			s.gw.trace.replyLocked(s, r, l.key.b, p)
		}
		r.done = true
	}
	s.flushFIFOLocked()
	s.mu.Unlock()
	if left {
		l.leave(s)
	}
}

// waitLines waits until none of s's submits on a line is unanswered, or
// the server stops dialling: a session s opens now must not overtake them.
func (s *gwSession) waitLines() {
	for {
		s.mu.Lock()
		if s.lineOut == 0 || s.closed {
			s.mu.Unlock()
			return
		}
		if s.lineIdle == nil {
			s.lineIdle = make(chan struct{})
		}
		ch := s.lineIdle
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.gw.dials.Done():
			return
		}
	}
}

// linesBacklogged reports whether one of lines, those a session used, has
// more than limit bytes waiting for its backend.
func linesBacklogged(lines []*gwLine, limit int) bool {
	for _, l := range lines {
		if l.conn.Backlog() > limit {
			return true
		}
	}
	return false
}

// queueLineFlushes is gwSession.queueFlushes for lines, those the session
// used.
func queueLineFlushes(lines []*gwLine, later func(routing.LoopSession)) {
	for _, l := range lines {
		if l.dirty.Swap(false) {
			if later != nil {
				later(l.conn)
			} else {
				_ = l.conn.Flush()
			}
		}
	}
}

// pruneLines drops the lines that are gone; the caller holds s.mu.
func pruneLines(ls []*gwLine) []*gwLine {
	n := 0
	for _, l := range ls {
		l.mu.Lock()
		dead := l.dead
		l.mu.Unlock()
		if !dead {
			ls[n] = l
			n++
		}
	}
	clear(ls[n:])
	return ls[:n]
}
