package proxy

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy/auth"
	"github.com/jobgate/jobgate/tracing"
)

// flushingClock runs the server's flushDirty after each timer function, so
// what the engine sends from its timer reaches idle connections.
type flushingClock struct {
	clock.Clock
	srv *GearmanServer
}

// AfterFunc wraps f.
func (c flushingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.Clock.AfterFunc(d, func() {
		f()
		c.srv.flushDirty()
	})
}

// GearmanConfig configures a GearmanServer.
type GearmanConfig struct {
	// Engine configures the in-process job engine. Its Shutdown field is
	// set by the server (see OnShutdown). Set its Journal (from
	// gearman.OpenJournal) to make background jobs durable: the server then
	// sends JOB_CREATED once the job's record is durable, without ever
	// waiting for the disk on a goroutine that serves connections.
	Engine gearman.Config
	// Limits bound what clients may send (zero fields take the codec's
	// defaults).
	Limits codec.Limits
	// OnShutdown, when set, enables the admin commands "shutdown" and
	// "shutdown graceful" and is called when one is received: at once for
	// "shutdown", and for "shutdown graceful" once the listeners are closed
	// and no job is left. The server does not stop by itself; the owner
	// decides (jobgate's main shuts every service down).
	OnShutdown func(graceful bool)
	// MaxOutput is how many bytes may wait to be written to one connection
	// before it is closed as a slow consumer. Default 64 MiB.
	MaxOutput int
	// Goroutines serves every connection with its own read loop and writer
	// goroutines instead of the single epoll event loop used for TCP
	// connections on Linux. The loop costs far less CPU per job; this is
	// for comparison and for debugging.
	Goroutines bool
	// Log receives connection errors. Default slog.Default().
	Log *slog.Logger
	// Gateway, when not nil and it names an upstream backend, makes the
	// server a gateway: each connection gets a gateway session that routes
	// functions to the local engine or upstream gearmand servers
	// (gearman_gateway.go). Nil, or a gateway whose only backend is the
	// local one, keeps the plain server: connections talk to the engine
	// directly, at no extra cost. A gateway serves every connection with
	// the event loop, with its plain-TCP upstream sessions on the same
	// loop (gearman_gateway_loop.go); with a TLS upstream, whose writes
	// may block the loop, every connection gets its own goroutines
	// (Goroutines is implied).
	Gateway *GearmanGateway
	// Metrics, when set, counts requests by packet type and result
	// (gearman_metrics.go), connections, and jobs per function (through an
	// engine Observer), and reports queue depths at scrape time. nil: no
	// metrics, at the cost of a nil check per request.
	Metrics *metrics.Metrics
	// Auth, when set, identifies clients and decides what each may do
	// (gearman_auth.go), for the local engine and the gateway alike; nil:
	// auth off, at the cost of an atomic load per request. SetAuthPolicy
	// replaces it.
	Auth *auth.Policy
	// MaxBadTokens is how many unknown tokens a connection may send
	// before it is closed; 0 means DefaultMaxBadTokens.
	MaxBadTokens int
	// ConnLimits protect the server from its clients (limits.go); their
	// timeouts run on Engine.Clock. A non-zero WriteBufferLimit replaces
	// MaxOutput.
	ConnLimits Limits
	// Tracer, when set, traces the local engine's jobs
	// (gearman_trace.go). nil: no spans, at the cost of a nil check per
	// request. The server sets the engine's TraceHook.
	Tracer *tracing.Tracer
	// TraceTableSize caps the jobs a gateway keeps trace state for
	// (tracing.Table: creation context, deliveries, open span), evicting
	// the least recently used. 0 means tracing.DefaultTableSize.
	TraceTableSize int
}

// GearmanServer serves the Gearman protocol (binary and admin text on one
// port) from an in-process engine, and, with GearmanConfig.Gateway, from
// upstream gearmand servers too.
type GearmanServer struct {
	cfg    GearmanConfig
	engine *gearman.Engine
	log    *slog.Logger
	gw     *gearmanGateway // nil: connections talk to the engine directly

	metrics    *metrics.Metrics    // nil: no metrics
	connSeries *metrics.ConnSeries // metrics.Conns(Gearman), resolved once
	guard      *connGuard          // limits.go
	draining   atomic.Bool         // drain.go: submissions get ERROR
	trace      *gearmanTrace       // nil: tracing off

	mu        sync.Mutex
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[*gearmanConn]struct{} // guarded by mu
	closing   bool                      // guarded by mu: Shutdown called
	addr      net.Addr                  // guarded by mu: first listener's address
	wg        sync.WaitGroup            // two per connection: its read loop and its writer; the event loop; requests handled off it

	dmu   sync.Mutex     // guards dirty
	dirty []*gearmanConn // idle connections with output queued by others

	loopOnce sync.Once
	loop     atomic.Pointer[gearmanLoop] // serves TCP connections where supported; nil: goroutines

	auth         atomic.Pointer[auth.Policy] // nil: auth off
	maxBadTokens int
}

// markDirty records that c, idle in its read, got output from another
// connection; that connection's read loop writes it at the end of its batch
// (flushDirty), which costs no goroutine switch.
func (s *GearmanServer) markDirty(c *gearmanConn) {
	s.dmu.Lock()
	s.dirty = append(s.dirty, c)
	s.dmu.Unlock()
}

// flushDirty writes the output of connections marked dirty, and wakes the
// event loop for its connections. Every goroutine other than the loop's
// calls it after calling into the engine.
func (s *GearmanServer) flushDirty() {
	if l := s.loop.Load(); l != nil {
		l.kick()
	}
	s.flushGoroutineDirty()
}

// flushGoroutineDirty writes the output of goroutine-served connections
// marked dirty.
func (s *GearmanServer) flushGoroutineDirty() {
	s.dmu.Lock()
	if len(s.dirty) == 0 {
		s.dmu.Unlock()
		return
	}
	batch := s.dirty
	s.dirty = nil
	s.dmu.Unlock()
	for i, c := range batch {
		c.flushForeign()
		batch[i] = nil
	}
	s.dmu.Lock()
	if s.dirty == nil {
		s.dirty = batch[:0] // reuse the array
	}
	s.dmu.Unlock()
}

// NewGearmanServer builds a server and its engine.
func NewGearmanServer(cfg GearmanConfig) (*GearmanServer, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 64 << 20
	}
	s := &GearmanServer{
		cfg:       cfg,
		log:       cfg.Log,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*gearmanConn]struct{}),
	}
	ecfg := cfg.Engine
	if ecfg.Clock == nil {
		ecfg.Clock = clock.Real{}
	}
	// Packets the engine's timer sends (epoch jobs, timeouts) are written
	// when the timer function returns.
	ecfg.Clock = flushingClock{ecfg.Clock, s}
	// Replies the engine releases once journal records are durable are
	// written by its completer goroutine; wake the event loop for them.
	if notify := ecfg.Notify; notify != nil {
		ecfg.Notify = func() { notify(); s.flushDirty() }
	} else {
		ecfg.Notify = s.flushDirty
	}
	ecfg.Shutdown = nil
	if cfg.OnShutdown != nil {
		ecfg.Shutdown = s.adminShutdown
	}
	e, err := gearman.New(ecfg)
	if err != nil {
		return nil, err
	}
	s.engine = e
	s.auth.Store(cfg.Auth)
	s.maxBadTokens = cmp.Or(cfg.MaxBadTokens, DefaultMaxBadTokens)
	if cfg.Metrics != nil {
		s.wireMetrics(cfg.Metrics)
	}
	s.guard = newConnGuard(cfg.Engine.Clock, s.log, s.connSeries, cfg.ConnLimits, gearmanReject)
	if g := cfg.Gateway; g != nil && !g.Handles.Passthrough() {
		gw, err := newGearmanGateway(s, g)
		if err != nil {
			e.Stop()
			return nil, err
		}
		s.gw = gw
		// Upstreams the event loop cannot serve (TLS) could block it.
		s.cfg.Goroutines = s.cfg.Goroutines || !gw.loopable()
	} else {
		s.wireTracing(cfg.Tracer) // a gateway traces its jobs itself
	}
	return s, nil
}

// Engine returns the server's engine.
func (s *GearmanServer) Engine() *gearman.Engine { return s.engine }

// Addr returns the address of the first listener Serve was given, or nil.
func (s *GearmanServer) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Serve accepts connections on l until Shutdown or an admin "shutdown
// graceful" closes it (then it returns nil). Accept errors such as running
// out of file descriptors are logged and retried with a backoff; l closed
// by someone else ends Serve with an error.
func (s *GearmanServer) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	l = s.guard.wrap(l)
	s.listeners[l] = struct{}{}
	if s.addr == nil {
		s.addr = l.Addr()
	}
	// Started under mu, so that Shutdown, which sets closing under mu,
	// either sees the loop to stop it or keeps it from starting.
	s.loopOnce.Do(func() {
		if s.cfg.Goroutines || (s.gw != nil && !s.gw.loopable()) { // a reload may have added TLS
			return
		}
		loop, err := startGearmanLoop(s)
		if err != nil {
			s.log.Warn("gearman event loop unavailable; serving with goroutines", "err", err)
			return
		}
		s.loop.Store(loop)
	})
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	closed := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, open := s.listeners[l]
		return s.closing || !open
	}
	if err := acceptLoop(l, "gearman", s.log, closed, s.startConn); err != nil {
		return fmt.Errorf("gearman accept: %w", err)
	}
	return nil
}

// Shutdown stops accepting, closes every connection and waits for their
// goroutines, or for ctx to end. The engine's jobs stay in memory.
func (s *GearmanServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.guard.stop()
	for l := range s.listeners {
		l.Close()
		delete(s.listeners, l)
	}
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	if loop := s.loop.Load(); loop != nil {
		loop.stop()
	}
	if s.gw != nil {
		s.gw.stopDials() // requests handled off the loop stop dialling
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		if s.gw != nil {
			s.gw.stop()
		}
		s.engine.Stop()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// adminShutdown is the engine's Shutdown callback.
func (s *GearmanServer) adminShutdown(graceful bool) {
	if !graceful {
		s.cfg.OnShutdown(false)
		return
	}
	// gearmand's graceful mode: stop listening, let the jobs finish.
	s.mu.Lock()
	for l := range s.listeners {
		delete(s.listeners, l)
		l.Close()
	}
	s.mu.Unlock()
	go func() {
		for s.engine.Stats().Jobs > 0 {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return // shut down meanwhile
			}
			time.Sleep(100 * time.Millisecond)
		}
		s.cfg.OnShutdown(true)
	}()
}

// startConn registers nc and starts its goroutines; false when shutting
// down.
func (s *GearmanServer) startConn(nc net.Conn) bool {
	c := newGearmanConn(s, nc, s.loop.Load())
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		c.sess.Close()
		c.closeFD()
		return false
	}
	s.conns[c] = struct{}{}
	if s.connSeries != nil {
		s.connSeries.Opened()
	}
	c.startWatch()
	if c.loop != nil {
		s.wg.Add(1)
		s.mu.Unlock()
		c.loop.add(c)
		return true
	}
	s.wg.Add(2)
	s.mu.Unlock()
	go c.writeLoop()
	go c.readLoop()
	return true
}

func (s *GearmanServer) removeConn(c *gearmanConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.guard.unwatch(&c.watch)
	if s.connSeries != nil {
		s.connSeries.Closed()
	}
}
