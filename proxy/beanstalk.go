// Package proxy serves the job protocols over TCP: listeners, per-client
// read loops, and (later) TLS, sniffing, auth and routing.
package proxy

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy/auth"
	"github.com/jobgate/jobgate/tracing"
)

// BeanstalkConfig configures a BeanstalkServer.
type BeanstalkConfig struct {
	// Engine serves the commands. Nil means a new engine built from
	// EngineConfig, owned (and closed at Shutdown) by the server.
	Engine *engine.Engine
	// EngineConfig builds the engine when Engine is nil. With
	// EngineConfig.Journal set (engine.OpenJournal), the server restores
	// the journaled jobs and acknowledges each change once it is durable;
	// close the journal after Shutdown.
	EngineConfig engine.Config
	// MaxLine is the longest command line in bytes, "\r\n" included; 0
	// means beanstalkd's 224.
	MaxLine int
	// Log receives connection errors; nil discards them.
	Log *slog.Logger
	// Metrics, when set, counts commands by verb and result, connections,
	// and jobs per tube (through an engine Observer), and reports queue
	// depths at scrape time. nil: no metrics, at the cost of a nil check.
	// The server sets the engine's Observer, replacing any other.
	Metrics *metrics.Metrics
	// Auth, when set, identifies clients and decides what each may do
	// (beanstalk_auth.go); nil: auth off, at the cost of an atomic load
	// per command. SetAuthPolicy replaces it.
	Auth *auth.Policy
	// MaxBadTokens is how many unknown tokens a connection may send
	// before it is closed; 0 means DefaultMaxBadTokens.
	MaxBadTokens int
	// ConnLimits protect the server from its clients (limits.go).
	ConnLimits Limits
	// Clock drives the idle, read and write timeouts. Default the real one.
	Clock clock.Clock
	// Tracer, when set, traces every job put while it is set
	// (beanstalk_trace.go). nil: no spans, at the cost of a nil check.
	// The server sets the engine's TraceHook.
	Tracer *tracing.Tracer
	// TraceTableSize caps the jobs a traced gateway keeps trace state for
	// (beanstalk_gateway_trace.go); 0 means tracing.DefaultTableSize.
	TraceTableSize int
	// Gateway, when set, routes tubes to upstream beanstalkd servers and
	// the engine (beanstalk_gateway.go). nil: every command goes straight
	// to the engine.
	Gateway *BeanstalkGateway
	// Goroutines serves every connection with its own goroutine instead
	// of the single epoll event loop (beanstalk_loop_linux.go) used on
	// Linux for plain TCP connections of the direct engine path (no
	// Gateway). The loop costs less CPU per command; this is for
	// comparison and debugging.
	Goroutines bool
}

// BeanstalkServer is a beanstalkd-compatible TCP server: one goroutine per
// connection reads a command, hands it to the connection's engine Session,
// and writes the reply, flushing only when no more input is buffered, so
// pipelined commands are answered with one write. On Linux, plain TCP
// connections to the engine are served instead by one epoll event loop
// (beanstalk_loop_linux.go).
type BeanstalkServer struct {
	eng        *engine.Engine
	ownsEng    bool
	limits     wire.Limits
	log        *slog.Logger
	metrics    *metrics.Metrics    // nil: no metrics
	connSeries *metrics.ConnSeries // m.Conns(Beanstalk), resolved once
	guard      *connGuard          // limits.go
	trace      *beanstalkTrace     // nil: tracing off
	gw         *beanstalkGateway   // nil: the direct engine path
	mu         sync.Mutex          // guards the fields below
	addr       net.Addr
	lns        map[net.Listener]struct{}
	conns      map[*beanstalkConn]struct{}
	shutdown   bool
	quit       chan struct{}  // closed by Shutdown
	wg         sync.WaitGroup // one per connection goroutine
	goroutines bool           // BeanstalkConfig.Goroutines
	loop       *beanstalkLoop // guarded by mu; nil until the first loop connection
	noLoop     bool           // guarded by mu; the loop failed to start

	auth         atomic.Pointer[auth.Policy] // nil: auth off
	maxBadTokens int
}

// NewBeanstalkServer returns a server; call Serve to start it.
func NewBeanstalkServer(cfg BeanstalkConfig) (*BeanstalkServer, error) {
	if cfg.MaxLine != 0 && cfg.MaxLine < wire.DefaultMaxLine {
		return nil, errors.New("proxy: beanstalk MaxLine below 224 would refuse valid commands")
	}
	s := &BeanstalkServer{
		eng:   cfg.Engine,
		log:   cfg.Log,
		lns:   make(map[net.Listener]struct{}),
		conns: make(map[*beanstalkConn]struct{}),
		quit:  make(chan struct{}),
	}
	s.goroutines = cfg.Goroutines
	if s.eng == nil {
		eng, err := engine.New(cfg.EngineConfig)
		if err != nil {
			return nil, err
		}
		s.eng = eng
		s.ownsEng = true
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.limits = wire.Limits{MaxLine: cfg.MaxLine, MaxJobSize: s.eng.MaxJobSize()}
	s.auth.Store(cfg.Auth)
	s.maxBadTokens = cmp.Or(cfg.MaxBadTokens, DefaultMaxBadTokens)
	if cfg.Metrics != nil {
		s.wireMetrics(cfg.Metrics)
	}
	s.guard = newConnGuard(cfg.Clock, s.log, s.connSeries, cfg.ConnLimits, beanstalkReject)
	s.wireTracing(cfg.Tracer)
	if cfg.Gateway != nil {
		gw, err := newBeanstalkGateway(s, cfg.Gateway, cfg.TraceTableSize)
		if err != nil {
			if s.ownsEng {
				s.eng.Close()
			}
			return nil, err
		}
		s.gw = gw
	}
	return s, nil
}

// Engine returns the engine the server runs on.
func (s *BeanstalkServer) Engine() *engine.Engine { return s.eng }

// Addr returns the address of the listener Serve was last given, or nil.
func (s *BeanstalkServer) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Serve accepts connections on l until Shutdown (or a drain closes l),
// then returns nil. Accept errors such as running out of file descriptors
// are logged and retried with a backoff; l closed by someone else ends
// Serve with an error. It closes l.
func (s *BeanstalkServer) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	l = s.guard.wrap(l)
	s.lns[l] = struct{}{}
	s.addr = l.Addr()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, l)
		s.mu.Unlock()
		l.Close()
	}()

	closed := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, open := s.lns[l]
		return s.shutdown || !open // Shutdown, or Drain closed it
	}
	return acceptLoop(l, "beanstalk", s.log, closed, func(nc net.Conn) bool {
		c := s.newConn(nc)
		if c == nil {
			return false
		}
		if !s.serveOnLoop(c) {
			go c.serve()
		}
		return true
	})
}

// Shutdown stops accepting, closes every connection (their reserved jobs go
// back to ready) and waits for the connection goroutines until ctx ends.
// beanstalkd has no graceful drain either: a client blocked in reserve
// would hold a graceful shutdown forever.
func (s *BeanstalkServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.shutdown {
		close(s.quit)
	}
	s.shutdown = true
	s.guard.stop()
	for l := range s.lns {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.stopLoop()
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.gw != nil {
		s.gw.stop()
	}
	if s.ownsEng {
		s.eng.Close()
	}
	return nil
}

// newConn registers a connection, or returns nil after Shutdown.
func (s *BeanstalkServer) newConn(nc net.Conn) *beanstalkConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return nil
	}
	c := &beanstalkConn{srv: s, nc: nc, wake: make(chan struct{}, 1)}
	c.in = beanstalkInput{nc: nc, watch: &c.watch}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	if s.connSeries != nil {
		s.connSeries.Opened()
	}
	return c
}

func (s *BeanstalkServer) dropConn(c *beanstalkConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if s.connSeries != nil {
		s.connSeries.Closed()
	}
	s.wg.Done()
}

// beanstalkConn is one client connection. All fields belong to its serve
// goroutine, except that the engine's notify callback touches nc's read
// deadline and sends on wake.
type beanstalkConn struct {
	srv   *BeanstalkServer
	nc    net.Conn
	in    beanstalkInput
	wake  chan struct{} // one token per answered pending reserve
	watch connWatch     // for the timeouts (limits.go)

	auth *beanstalkAuth // nil until a command arrives while auth is on
	loop *bloopConn     // set when the event loop serves it (beanstalk_loop_linux.go)
}

// beanstalkInput sits between the connection and the codec Reader. While a
// reserve waits, the connection goroutine reads ahead to notice the client
// hanging up (as beanstalkd does); bytes read then are kept here and handed
// to the codec first.
//
// It also flushes the replies before the codec blocks for more input in the
// middle of a command (a put line whose body has not all arrived): the read
// loop flushes when nothing is buffered, but a partial command is buffered,
// and a client waiting for earlier replies before it sends the rest would
// wait forever.
type beanstalkInput struct {
	nc       net.Conn
	wr       *wire.Writer
	ahead    []byte // read ahead, not yet handed to the codec
	aheadBuf []byte // ahead's buffer, kept for the next wait
	rd       *wire.Reader
	watch    *connWatch
}

// Read hands over read-ahead bytes first, then flushes pending replies and
// reads the connection.
func (in *beanstalkInput) Read(p []byte) (int, error) {
	if len(in.ahead) > 0 {
		n := copy(p, in.ahead)
		in.ahead = in.ahead[n:]
		return n, nil
	}
	if in.wr.Buffered() > 0 {
		if err := in.wr.Flush(); err != nil {
			return 0, err
		}
	}
	// A request begun and not finished is under the read timeout.
	in.watch.setFlag(watchPartial, in.rd.Buffered() > 0)
	return in.nc.Read(p)
}

// maxReadAhead bounds what a client may pipeline behind a waiting reserve
// before we stop reading (and stop watching for its hang-up).
const maxReadAhead = 64 << 10

// pastDeadline is a read deadline that has passed: setting it wakes a
// blocked Read at once.
var pastDeadline = time.Unix(1, 0)

// notify is the session's callback: a pending reserve has its answer. It
// runs with the engine lock held, so it only pokes the goroutine: the past
// deadline ends the read-ahead, the token says why.
func (c *beanstalkConn) notify() {
	c.nc.SetReadDeadline(pastDeadline)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *beanstalkConn) serve() {
	defer c.srv.dropConn(c)
	defer c.nc.Close()
	if tc, ok := unwrapConn(c.nc).(*net.TCPConn); ok {
		tc.SetNoDelay(true) // replies are flushed deliberately; never delay them
	}
	if c.srv.gw != nil {
		c.serveGateway()
		return
	}
	sess := c.srv.eng.NewSession(c.notify)
	defer sess.Close()
	c.startWatch(sess)
	defer c.srv.guard.unwatch(&c.watch)
	wr := wire.NewWriter(beanstalkOut{c})
	c.in.wr = wr
	rd := wire.NewReader(&c.in, c.srv.limits)
	c.in.rd = rd
	var r wire.Reply
	m := c.srv.metrics
	bt, ct := c.srv.trace, beanstalkConnTrace{}
	for {
		cmd, err := rd.ReadCommand()
		var verb wire.Verb // 0 ("unknown") for a line the codec refused
		if err == nil {
			verb = cmd.Verb
			c.watch.frames.Add(1)
		}
		if err != nil {
			var ce *wire.ClientError
			if !errors.As(err, &ce) {
				if err != io.EOF && !errors.Is(err, net.ErrClosed) {
					c.srv.log.Debug("beanstalk read", "remote", c.nc.RemoteAddr().String(), "err", err)
				}
				wr.Flush()
				return
			}
			sess.RejectPut(ce.Kind)
			r = wire.Reply{Kind: ce.Kind}
			if ce.Kind == wire.JobTooBig || ce.Kind == wire.ExpectedCRLF {
				verb = wire.Put
				if bt != nil {
					bt.rejectedPut(sess, ce.Kind)
				}
			}
		} else if (c.auth != nil || c.srv.auth.Load() != nil || auth.IsReservedTube(cmd.Tube)) && c.authorize(c.srv.auth.Load(), sess, cmd, &r) {
			// answered by auth: a token or a denial
		} else if c.overReserved(sess, verb) {
			r = wire.Reply{Kind: wire.DeadlineSoon}
		} else {
			if bt != nil {
				bt.before(&ct, sess, cmd)
			}
			if !sess.Exec(cmd, &r) {
				if wr.Flush() != nil || !c.await(sess, &r) {
					return
				}
			}
			if bt != nil {
				bt.after(&ct, cmd, &r)
			}
		}
		if m != nil {
			m.Commands.Beanstalk(verb, beanstalkResult(r.Kind))
		}
		if r.Kind == 0 { // quit
			wr.Flush()
			return
		}
		if wr.WriteReply(&r) != nil {
			return
		}
		if rd.Buffered() == 0 && len(c.in.ahead) == 0 {
			if wr.Flush() != nil {
				return
			}
		}
	}
}

// await waits for a pending reserve's answer, reading ahead meanwhile to
// notice the client closing its side. It returns true with the reply in
// *r, or false when the connection broke. A client that half-closed (EOF)
// gets TIMED_OUT, as from beanstalkd, and the commands it sent before
// closing are still served; a job handed to the reserve at that moment goes
// back to ready.
func (c *beanstalkConn) await(sess *engine.Session, r *wire.Reply) bool {
	in := &c.in
	if len(in.ahead) == 0 {
		if in.aheadBuf == nil {
			in.aheadBuf = make([]byte, 0, 4096)
		}
		in.ahead = in.aheadBuf[:0]
	}
	for len(c.in.ahead) < maxReadAhead {
		if cap(in.ahead)-len(in.ahead) < 512 {
			buf := make([]byte, len(in.ahead), 2*cap(in.ahead)+4096)
			copy(buf, in.ahead)
			in.ahead, in.aheadBuf = buf, buf
		}
		n, err := c.nc.Read(c.in.ahead[len(c.in.ahead):cap(c.in.ahead)])
		c.in.ahead = c.in.ahead[:len(c.in.ahead)+n]
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			break // notify set the deadline: the answer is in
		}
		sess.Cancel()
		// A notify that raced the cancel has run (both hold the engine
		// lock); undo it so the next read does not time out.
		select {
		case <-c.wake:
		default:
		}
		c.nc.SetReadDeadline(time.Time{})
		sess.Result(r)
		return err == io.EOF
	}
	select {
	case <-c.wake:
	case <-c.srv.quit: // a client that filled the read-ahead is no longer watched
		sess.Cancel()
		return false
	}
	c.nc.SetReadDeadline(time.Time{})
	sess.Result(r)
	return true
}
