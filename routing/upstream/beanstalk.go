package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/routing"
)

// DefaultReserveRound is the longest wait one upstream reserve round may
// take when BeanstalkConfig.ReserveRound is zero.
const DefaultReserveRound = time.Second

// BeanstalkConfig configures a Beanstalk upstream.
type BeanstalkConfig struct {
	Config
	// Limits bounds what is read from the server (zero fields: the
	// codec's defaults). A RESERVED or FOUND body over MaxJobSize is
	// skipped and reported as a *beanstalk.ReplyTooBigError.
	Limits beanstalk.Limits
	// ReserveRound is the longest a reserve waits on the server in one
	// go, in whole seconds (at least one). A reserve is sent as
	// reserve-with-timeout rounds of at most this long, so that Cancel
	// takes effect, and the session is usable again, within one round.
	// Zero means DefaultReserveRound.
	ReserveRound time.Duration
	// Clock measures a client's reserve-with-timeout across rounds.
	// Default clock.Real{}.
	Clock clock.Clock
}

// Beanstalk is an upstream beanstalkd: a routing.BeanstalkBackend whose
// sessions are TCP connections to it. It is safe for concurrent use.
//
// Cancelling a reserve. beanstalkd has no command to abandon a waiting
// reserve: only an answer or closing the connection ends it, and closing
// would also give back every job the session has reserved and forget its
// use and watch list. So a session never sends a plain reserve: it sends
// reserve-with-timeout in rounds of at most ReserveRound, sending the next
// round when one times out, until a job comes or the client's own timeout
// is used up. Cancel answers the client's reserve at once with TIMED_OUT
// and lets the round in flight finish: if it brings a job, the session
// asks stats-job for the job's priority and releases it with that priority
// and no delay, so it is ready again within a few round trips, in its old
// place (beanstalkd orders by priority, then id), and no job is stolen.
// Until the round ends (at most ReserveRound), later commands on this
// session wait behind it; other backends are not affected.
type Beanstalk struct {
	cfg   BeanstalkConfig
	round uint32 // ReserveRound in seconds
}

var _ routing.BeanstalkBackend = (*Beanstalk)(nil)

// NewBeanstalk returns the backend for the server at cfg.Addr. It does not
// connect.
func NewBeanstalk(cfg BeanstalkConfig) (*Beanstalk, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.ReserveRound < 0 {
		return nil, errors.New("upstream: " + cfg.Addr + ": negative reserve round")
	}
	if cfg.ReserveRound == 0 {
		cfg.ReserveRound = DefaultReserveRound
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Beanstalk{cfg: cfg, round: uint32(max(1, cfg.ReserveRound/time.Second))}, nil
}

// Addr returns the server's address.
func (b *Beanstalk) Addr() string { return b.cfg.Addr }

// Open connects and starts a session (see routing.BeanstalkBackend).
func (b *Beanstalk) Open(ctx context.Context, closed func(error)) (routing.BeanstalkConn, error) {
	nc, err := b.cfg.dial(ctx)
	if err != nil {
		return nil, err
	}
	s := &beanstalkSession{b: b, nc: nc, closed: closed, w: beanstalk.NewWriter(nc)}
	go s.readLoop(beanstalk.NewReplyReader(nc, b.cfg.Limits))
	return s, nil
}

// opKind says who waits for a reply.
type opKind uint8

const (
	opUser    opKind = iota + 1 // a Do: its done gets the reply
	opRound                     // one reserve-with-timeout round of a reserve
	opStats                     // stats-job of a job a cancelled reserve got
	opRelease                   // release of that job; the reply is dropped
)

// op is one command sent and not yet answered.
type op struct {
	kind opKind
	done func(*beanstalk.Reply, error) // opUser
	res  *reserve                      // opRound
	id   uint64                        // opStats: the job to release
	wait time.Duration                 // how long the server may rightly hold the reply
}

// reserve is a client's reserve, served by one or more rounds.
type reserve struct {
	done     func(*beanstalk.Reply, error)
	timed    bool      // reserve-with-timeout
	deadline time.Time // when a timed reserve runs out, on the configured clock; zero when its first round takes it all
	first    uint32    // the first round's timeout
	// cancelled and finished are guarded by the session's mu. finished
	// means done has been or is being called; cancelled that Cancel did
	// it, so a job the round brings goes back.
	cancelled, finished bool
}

// beanstalkSession is one connection to beanstalkd.
//
// Lock order: wmu before mu. Callbacks run with neither held. The reader
// goroutine writes too (the next round, the release of a job a cancelled
// reserve got), taking wmu like any writer.
type beanstalkSession struct {
	b      *Beanstalk
	nc     net.Conn // nil for an event-loop session (lp)
	lp     *beanstalkLoopIO
	closed func(error)

	wmu sync.Mutex        // serialises writes and keeps the queue in write order
	w   *beanstalk.Writer // guarded by wmu
	cmd beanstalk.Command // scratch for internal commands; guarded by wmu

	quiet atomic.Bool // Close was called: report nothing more
	// ended is set with err, so that the per-reply and per-flush checks
	// of a live session (failed) need not take mu.
	ended atomic.Bool

	mu    sync.Mutex
	queue []op // commands written and not answered, oldest first; guarded by mu
	// qbuf is queue's whole backing array: an emptied queue starts over
	// at its front, so that a session with one command at a time does
	// not allocate per command. Guarded by mu.
	qbuf     []op
	spare    *reserve  // a finished reserve to reuse; guarded by mu
	pending  *reserve  // the client's unfinished reserve; guarded by mu
	deadline time.Time // the read deadline in force; guarded by mu
	// rearm: the queue's head changed since the last Expire, which moves
	// the deadline of an event-loop session; guarded by mu.
	rearm bool
	err   error // why the session ended, first cause only; guarded by mu
}

var timedOut = beanstalk.Reply{Kind: beanstalk.TimedOut}

func (s *beanstalkSession) Do(cmd *beanstalk.Command, done func(*beanstalk.Reply, error)) {
	var err error
	switch cmd.Verb {
	case beanstalk.Quit:
		s.Close()
		err = routing.ErrClosed
	case beanstalk.Reserve, beanstalk.ReserveWithTimeout:
		s.wmu.Lock()
		r := s.newReserve()
		*r = reserve{done: done, first: s.b.round}
		if cmd.Verb == beanstalk.ReserveWithTimeout {
			r.timed = true
			r.first = min(cmd.Timeout, s.b.round)
			if cmd.Timeout > s.b.round {
				r.deadline = s.b.cfg.Clock.Now().Add(time.Duration(cmd.Timeout) * time.Second)
			} // else the first round is the whole wait: no clock read
		}
		err = s.writeRound(r, r.first, true)
		s.wmu.Unlock()
	default:
		if cmd.Verb < beanstalk.Put || cmd.Verb > beanstalk.Quit {
			// The caller's mistake: refuse it rather than queue a reply
			// that will never come.
			done(nil, fmt.Errorf("upstream: invalid beanstalk verb %d", cmd.Verb))
			return
		}
		s.wmu.Lock()
		err = s.write(cmd, op{kind: opUser, done: done}, nil)
		s.wmu.Unlock()
	}
	if err != nil {
		done(nil, err)
	}
}

// newReserve returns the spare reserve, or a new one; s.wmu is held.
func (s *beanstalkSession) newReserve() *reserve {
	s.mu.Lock()
	r := s.spare
	s.spare = nil
	s.mu.Unlock()
	if r == nil {
		r = new(reserve)
	}
	return r
}

// write queues o and writes cmd; s.wmu is held. If the session has ended it
// returns why, and nothing is queued: the caller answers. Otherwise o is
// queued first (with pending, when not nil, as the client's reserve), so
// that if the write fails, the reader's cleanup answers it; checking the
// session's end in the same critical section as queueing means no op can
// slip in after that cleanup.
func (s *beanstalkSession) write(cmd *beanstalk.Command, o op, pending *reserve) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if pending != nil {
		s.pending = pending
	}
	if len(s.queue) == 0 {
		s.queue = s.qbuf[:0]
	}
	s.queue = append(s.queue, o)
	if cap(s.queue) > cap(s.qbuf) {
		s.qbuf = s.queue[:0] // grown: the new array is the one to reuse
	}
	if len(s.queue) == 1 {
		s.armLocked()
	}
	s.mu.Unlock()
	if s.b.cfg.IOTimeout > 0 && s.nc != nil {
		_ = s.nc.SetWriteDeadline(s.b.cfg.ioDeadline(0))
	}
	if s.lp != nil {
		s.lp.queueCommand(cmd)
	} else if err := s.w.WriteCommand(cmd); err != nil {
		s.fail("write", err)
	}
	return nil
}

// writeRound sends one round of r, making r the pending reserve when first
// is set. s.wmu is held.
func (s *beanstalkSession) writeRound(r *reserve, secs uint32, first bool) error {
	s.cmd = beanstalk.Command{Verb: beanstalk.ReserveWithTimeout, Timeout: secs}
	var pending *reserve
	if first {
		pending = r
	}
	return s.write(&s.cmd, op{kind: opRound, res: r, wait: time.Duration(secs) * time.Second}, pending)
}

func (s *beanstalkSession) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.flushLocked()
}

// flushLocked writes out the buffer. s.wmu is held.
func (s *beanstalkSession) flushLocked() error {
	if err := s.failed(); err != nil {
		return err
	}
	if s.w.Buffered() > 0 {
		if s.b.cfg.IOTimeout > 0 && s.nc != nil {
			_ = s.nc.SetWriteDeadline(s.b.cfg.ioDeadline(0))
		}
		if err := s.w.Flush(); err != nil {
			return s.fail("write", err)
		}
	}
	if s.lp != nil {
		return s.lp.flushLocked() // what the Writer gave the sink, in one write
	}
	return nil
}

func (s *beanstalkSession) Cancel() {
	s.mu.Lock()
	r := s.pending
	if r == nil || r.finished {
		s.mu.Unlock()
		return
	}
	r.cancelled, r.finished = true, true
	s.pending = nil
	s.mu.Unlock()
	reply := timedOut
	r.done(&reply, nil)
}

func (s *beanstalkSession) Close() {
	s.quiet.Store(true)
	s.mu.Lock()
	if s.err == nil {
		s.err = routing.ErrClosed
		s.ended.Store(true)
	}
	s.mu.Unlock()
	s.shut()
	s.drain(routing.ErrClosed)
}

// failed returns why the session ended, or nil while it is alive.
func (s *beanstalkSession) failed() error {
	if !s.ended.Load() {
		return nil // err is set (under mu) only with ended
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// fail ends the session for cause (the first cause wins) and returns the
// error it ended with. Closing the connection wakes the reader, which
// answers what is pending and reports to the owner.
func (s *beanstalkSession) fail(op string, cause error) error {
	s.mu.Lock()
	if s.err == nil {
		s.err = &routing.TransportError{Backend: s.b.cfg.Addr, Op: op, Err: cause}
		s.ended.Store(true)
	}
	err := s.err
	s.mu.Unlock()
	s.shut()
	return err
}

// shut ends the connection: closes it, or for an event-loop session shuts
// the socket down, which the loop sees (Ready) and which makes the server
// end the session.
func (s *beanstalkSession) shut() {
	if s.lp != nil {
		s.lp.shutdown(s)
		return
	}
	_ = s.nc.Close()
}

// drain answers every pending command with err, exactly once each.
func (s *beanstalkSession) drain(err error) {
	s.mu.Lock()
	queue := s.queue
	s.queue, s.qbuf = nil, nil
	var dones []func(*beanstalk.Reply, error)
	for _, o := range queue {
		switch {
		case o.kind == opUser:
			dones = append(dones, o.done)
		case o.kind == opRound && !o.res.finished:
			o.res.finished = true
			dones = append(dones, o.res.done)
		}
	}
	// The reserve may be between rounds (its last round answered, the
	// next not yet queued).
	if r := s.pending; r != nil && !r.finished {
		r.finished = true
		dones = append(dones, r.done)
	}
	s.pending = nil
	s.mu.Unlock()
	for _, d := range dones {
		d(nil, err)
	}
}

// armLocked sets the read deadline for the oldest unanswered command: an
// IOTimeout past what the server may rightly wait (a round's timeout), or
// none when nothing is pending. s.mu is held.
func (s *beanstalkSession) armLocked() {
	if s.b.cfg.IOTimeout == 0 {
		return
	}
	if s.lp != nil {
		s.rearm = true // Expire sets the deadline: no clock read per reply
		return
	}
	if len(s.queue) > 0 {
		s.deadline = s.b.cfg.ioDeadline(s.queue[0].wait)
	} else {
		s.deadline = time.Time{}
	}
	if s.nc != nil {
		_ = s.nc.SetReadDeadline(s.deadline)
	}
}

// late decides what a read timeout means, as gearmanSession.late does.
func (s *beanstalkSession) late() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 && !s.deadline.IsZero() && !time.Now().Before(s.deadline) {
		return true
	}
	if len(s.queue) == 0 {
		s.deadline = time.Time{}
	}
	_ = s.nc.SetReadDeadline(s.deadline)
	return false
}

// readLoop matches each reply to the oldest pending command until the
// connection ends, then answers what is left and tells the owner why.
func (s *beanstalkSession) readLoop(rr *beanstalk.ReplyReader) {
	for {
		r, err := rr.ReadReply()
		var big *beanstalk.ReplyTooBigError
		if err != nil && !errors.As(err, &big) {
			if isTimeout(err) {
				if !s.late() {
					continue
				}
				err = routing.ErrTimeout
			}
			s.fail("read", err)
			break
		}
		if !s.deliver(r, big) {
			break
		}
	}
	s.drain(s.failed())
	if !s.quiet.Load() && s.closed != nil {
		s.closed(s.failed())
	}
}

// deliver hands one reply (or a too-big reply, big) to the oldest command
// pending; false when none is, which fails the session.
func (s *beanstalkSession) deliver(r *beanstalk.Reply, big *beanstalk.ReplyTooBigError) bool {
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.mu.Unlock()
		var kind beanstalk.ReplyKind
		if big != nil {
			kind = big.Kind
		} else {
			kind = r.Kind
		}
		s.fail("read", fmt.Errorf("reply %v with no command pending", kind))
		return false
	}
	o := s.queue[0]
	s.queue[0] = op{}
	s.queue = s.queue[1:]
	s.armLocked()
	s.mu.Unlock()
	s.handle(o, r, big)
	return true
}

// handle delivers one reply (or a too-big reply, big) to the op it answers.
func (s *beanstalkSession) handle(o op, r *beanstalk.Reply, big *beanstalk.ReplyTooBigError) {
	switch o.kind {
	case opUser:
		if big != nil {
			o.done(nil, big)
		} else {
			o.done(r, nil)
		}
	case opRound:
		s.roundDone(o.res, r, big)
	case opStats:
		var st beanstalk.JobStats
		if big == nil && r.Kind == beanstalk.OK && st.ParseYAML(r.Body) == nil {
			s.internal(&beanstalk.Command{Verb: beanstalk.Release, ID: o.id, Pri: st.Pri}, op{kind: opRelease})
		}
		// Otherwise the job is no longer ours (its TTR ran out and
		// another consumer took or deleted it), or its stats could not
		// be read, in which case its TTR returns it to ready.
	case opRelease:
	}
}

// roundDone handles the answer to one round of reserve r.
func (s *beanstalkSession) roundDone(r *reserve, reply *beanstalk.Reply, big *beanstalk.ReplyTooBigError) {
	s.mu.Lock()
	if r.cancelled {
		s.mu.Unlock()
		switch {
		case big != nil && big.Kind == beanstalk.Reserved:
			s.giveBack(big.ID)
		case big == nil && reply.Kind == beanstalk.Reserved:
			s.giveBack(reply.ID)
		}
		return
	}
	if r.finished {
		// Close answered it already; the server gives back any job when
		// it sees the connection close.
		s.mu.Unlock()
		return
	}
	if big == nil && reply.Kind == beanstalk.TimedOut {
		s.mu.Unlock()
		s.nextRound(r)
		return
	}
	r.finished = true
	s.pending = nil
	// No op refers to r any more (its one round is answered): the next
	// reserve may reuse it.
	done := r.done
	r.done = nil
	s.spare = r
	s.mu.Unlock()
	if big != nil {
		done(nil, big)
	} else {
		done(reply, nil)
	}
}

// nextRound sends the next round of r after one timed out, or answers
// TIMED_OUT when a timed reserve has used up its time. A Cancel that came
// in between wins: nothing is sent.
func (s *beanstalkSession) nextRound(r *reserve) {
	s.wmu.Lock()
	s.mu.Lock()
	if r.cancelled || r.finished || s.err != nil {
		s.mu.Unlock()
		s.wmu.Unlock()
		return
	}
	secs := s.b.round
	if r.timed {
		var left time.Duration
		if !r.deadline.IsZero() {
			left = r.deadline.Sub(s.b.cfg.Clock.Now())
		}
		// Whole seconds, to the nearest: a 2 s reserve whose first
		// round of 1 s just ended has a hair under 1 s left, and answering
		// TIMED_OUT then would cut the client's wait by a second.
		rest := uint32((left + time.Second/2) / time.Second)
		if left <= 0 || rest == 0 || r.first == 0 {
			r.finished = true
			s.pending = nil
			s.mu.Unlock()
			s.wmu.Unlock()
			reply := timedOut
			r.done(&reply, nil)
			return
		}
		secs = min(secs, rest)
	}
	s.mu.Unlock()
	if s.writeRound(r, secs, false) == nil {
		_ = s.flushLocked()
	}
	s.wmu.Unlock()
}

// giveBack returns a job a cancelled reserve got to ready: stats-job for
// its priority, then release with that priority and no delay.
func (s *beanstalkSession) giveBack(id uint64) {
	s.internal(&beanstalk.Command{Verb: beanstalk.StatsJob, ID: id}, op{kind: opStats, id: id})
}

// internal sends a command of the session's own and flushes it.
func (s *beanstalkSession) internal(cmd *beanstalk.Command, o op) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.write(cmd, o, nil) == nil {
		_ = s.flushLocked()
	}
}

// Probe checks the server on a fresh connection with list-tube-used, for
// routing.HealthConfig.Probe.
func (b *Beanstalk) Probe(ctx context.Context) error {
	nc, err := b.cfg.dial(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	} else if b.cfg.IOTimeout > 0 {
		_ = nc.SetDeadline(b.cfg.ioDeadline(0))
	}
	if _, err := nc.Write([]byte("list-tube-used\r\n")); err != nil {
		return &routing.TransportError{Backend: b.cfg.Addr, Op: "write", Err: err}
	}
	r, err := beanstalk.NewReplyReader(nc, b.cfg.Limits).ReadReply()
	if err != nil {
		return &routing.TransportError{Backend: b.cfg.Addr, Op: "read", Err: err}
	}
	if r.Kind != beanstalk.Using {
		return &routing.TransportError{Backend: b.cfg.Addr, Op: "read", Err: fmt.Errorf("list-tube-used answered with %v", r.Kind)}
	}
	return nil
}
