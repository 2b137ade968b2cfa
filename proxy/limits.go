package proxy

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy/connlimit"
)

// Limits are the protective limits on one server's client connections
// (config section limits). The zero value limits nothing. A server takes
// new values at any time with SetLimits (a config reload); connections
// already open stay open.
type Limits struct {
	// MaxConns caps the server's open client connections (with those of
	// the servers it shares a connlimit.Group with, ShareConnections);
	// 0: no cap. A
	// refused Beanstalk client reads OUT_OF_MEMORY, a Gearman one an
	// ERROR packet TOO_MANY_CONNECTIONS, as the reply to its first request.
	MaxConns int
	// MaxConnsPerIP caps open connections from one source IP; 0: no cap.
	MaxConnsPerIP int
	// IdleTimeout closes a connection that sent no request for this long
	// and has nothing pending: no reserve waiting, no job reserved or
	// assigned, no PRE_SLEEP, no foreground job awaited. 0: never.
	IdleTimeout time.Duration
	// ReadTimeout closes a connection that started a request and sent no
	// complete one for this long. 0: no limit.
	ReadTimeout time.Duration
	// WriteTimeout closes a connection whose output made no progress for
	// this long (a client that stopped reading). 0: no limit.
	WriteTimeout time.Duration
	// MaxReservedPerConn caps the jobs one connection holds: past it a
	// Beanstalk reserve answers DEADLINE_SOON at once and a Gearman
	// GRAB_JOB* answers NO_JOB. 0: no cap.
	MaxReservedPerConn int
	// WriteBufferLimit caps the output queued for one Gearman connection
	// (packets other connections cause, such as NOOP and WORK_*); past it
	// the client is cut off. 0 keeps the server's MaxOutput. A Beanstalk
	// connection on the event loop stops being served while its unread
	// replies reach 256 KiB or this limit, if smaller, and is cut off if
	// more than this limit stays unwritten; 0: no cut-off. A Beanstalk
	// connection goroutine blocks in its write instead.
	WriteBufferLimit int
	// HandshakeTimeout bounds a TLS handshake on a TLSListener the server
	// serves. 0 keeps the listener's own (DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// MaxHandshakes caps the TLS handshakes in progress on each
	// TLSListener the server serves; 0: no cap.
	MaxHandshakes int
}

// sweepPeriod is how often the timeouts are checked: a quarter of the
// shortest one, so a timeout strikes between 1 and 1.25 times its value.
func (l *Limits) sweepPeriod() time.Duration {
	var p time.Duration
	for _, d := range []time.Duration{l.IdleTimeout, l.ReadTimeout, l.WriteTimeout} {
		if d > 0 && (p == 0 || d < p) {
			p = d
		}
	}
	return p / 4
}

// Bits of connWatch.flags.
const (
	watchPartial uint32 = 1 << iota // waiting for the rest of a started request
	watchWriting                    // output is waiting for the client to read
	// watchPaused: a request is handled off the Gearman event loop
	// (gearman_gateway_loop.go); the connection is busy, not reading.
	watchPaused
)

// connWatch is the per-connection state the timeouts need. The connection
// updates it with a few atomic operations per request and never reads a
// clock: the guard's sweeper, driven by the server's (injectable) clock,
// notices when the counters stop moving. One timer per server, none per
// connection or request.
type connWatch struct {
	frames atomic.Uint32 // bumped per request received
	wrote  atomic.Uint32 // bumped per write that made progress
	flags  atomic.Uint32 // watchPartial | watchWriting | watchPaused

	// The sweeper's own, under connGuard.mu.
	busy             func() bool            // something pending: never idle
	cut              func(connlimit.Reason) // close the connection
	seenFrames       uint32
	seenWrote        uint32
	quiet, writeWait time.Duration
}

// setFlag sets or clears bit in w.flags.
func (w *connWatch) setFlag(bit uint32, on bool) {
	old := w.flags.Load()
	if (old&bit != 0) == on {
		return // the common case: no write to the shared line
	}
	if on {
		w.flags.Or(bit)
	} else {
		w.flags.And(^bit)
	}
}

// connGuard applies a server's Limits: it wraps its listeners and sweeps
// its connections for the timeouts.
type connGuard struct {
	clk    clock.Clock
	log    *slog.Logger
	series *metrics.ConnSeries // nil: no metrics
	reject func(net.Conn, connlimit.Reason)
	limits atomic.Pointer[Limits]

	mu      sync.Mutex       // guards the fields below
	group   *connlimit.Group // counts connections against MaxConns and MaxConnsPerIP
	watched map[*connWatch]struct{}
	timer   clock.Timer // the armed sweep, nil when no timeout is set
	period  time.Duration
	stopped bool
}

func newConnGuard(clk clock.Clock, log *slog.Logger, series *metrics.ConnSeries, l Limits, reject func(net.Conn, connlimit.Reason)) *connGuard {
	if clk == nil {
		clk = clock.Real{}
	}
	g := &connGuard{clk: clk, log: log, series: series, reject: reject, watched: make(map[*connWatch]struct{}),
		group: connlimit.NewGroup(l.MaxConns, l.MaxConnsPerIP)}
	g.limits.Store(&l)
	return g
}

// share makes the server count its connections in group, with other
// servers, instead of its own; call it before Serve.
func (g *connGuard) share(group *connlimit.Group) {
	lim := g.current()
	group.SetLimits(lim.MaxConns, lim.MaxConnsPerIP)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.group = group
}

// current returns the limits in force.
func (g *connGuard) current() *Limits { return g.limits.Load() }

// set puts new limits in force (reload).
func (g *connGuard) set(l Limits) {
	g.limits.Store(&l)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.group.SetLimits(l.MaxConns, l.MaxConnsPerIP)
	g.armLocked()
}

// wrap returns l capped by the connection limits.
func (g *connGuard) wrap(l net.Listener) net.Listener {
	g.mu.Lock()
	o := connlimit.Options{Group: g.group, Reject: g.reject}
	g.mu.Unlock()
	if g.series != nil {
		o.OnReject = func(_ net.Addr, r connlimit.Reason) { g.series.Rejected(r.String()) }
	}
	if tl, ok := l.(*TLSListener); ok {
		return g.capTLS(tl, o) // counted before the handshake
	}
	return connlimit.NewListener(l, o)
}

// watch puts w under the sweeper until unwatch.
func (g *connGuard) watch(w *connWatch, busy func() bool, cut func(connlimit.Reason)) {
	w.busy, w.cut = busy, cut
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watched[w] = struct{}{}
	if g.timer == nil {
		g.armLocked()
	}
}

func (g *connGuard) unwatch(w *connWatch) {
	g.mu.Lock()
	delete(g.watched, w)
	g.mu.Unlock()
}

// stop ends the sweeps (server shutdown).
func (g *connGuard) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}

// armLocked (re)starts the sweep timer for the current timeouts.
func (g *connGuard) armLocked() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.period = g.current().sweepPeriod()
	if g.stopped || g.period <= 0 {
		return
	}
	g.timer = g.clk.AfterFunc(g.period, g.sweep)
}

// sweep checks every connection against the timeouts and cuts off those
// over one.
func (g *connGuard) sweep() {
	lim := g.current()
	type victim struct {
		w *connWatch
		r connlimit.Reason
	}
	var victims []victim
	var idleCandidates []*connWatch
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return
	}
	p := g.period
	for w := range g.watched {
		if f := w.frames.Load(); f != w.seenFrames {
			w.seenFrames, w.quiet = f, 0
		} else {
			w.quiet += p
		}
		flags := w.flags.Load()
		if n := w.wrote.Load(); n != w.seenWrote || flags&watchWriting == 0 {
			w.seenWrote, w.writeWait = n, 0
		} else {
			w.writeWait += p
		}
		switch {
		case lim.WriteTimeout > 0 && w.writeWait >= lim.WriteTimeout:
			victims = append(victims, victim{w, connlimit.ReasonWriteTimeout})
		case flags&watchPaused != 0:
			w.quiet = 0 // busy until it is read again
		case flags&watchPartial != 0:
			if lim.ReadTimeout > 0 && w.quiet >= lim.ReadTimeout {
				victims = append(victims, victim{w, connlimit.ReasonReadTimeout})
			}
		case lim.IdleTimeout > 0 && w.quiet >= lim.IdleTimeout:
			idleCandidates = append(idleCandidates, w)
		}
	}
	g.armLocked()
	g.mu.Unlock()
	// busy takes the engine's lock, which must not nest inside g.mu.
	for _, w := range idleCandidates {
		if !w.busy() {
			victims = append(victims, victim{w, connlimit.ReasonIdle})
		}
	}
	for _, v := range victims {
		if g.series != nil {
			g.series.Cut(v.r.String())
		}
		g.log.Debug("connection cut off", "reason", v.r.String())
		v.w.cut(v.r)
	}
}

// unwrapConn returns the socket under a connection the limited listener
// admitted, for socket options and the event loop. The admitted
// connection must still be closed through the wrapper, which frees its
// slot.
func unwrapConn(nc net.Conn) net.Conn {
	if lc, ok := nc.(*connlimit.Conn); ok {
		return lc.NetConn()
	}
	return nc
}
