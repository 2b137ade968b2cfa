package proxy

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultHandshakeTimeout bounds a TLS handshake on a TLSListener whose
// server sets no Limits.HandshakeTimeout (limits.handshake_timeout has the
// same default): a client that connects and then sends nothing (or too
// little) is dropped after it rather than holding a goroutine and a
// descriptor for ever. Ten seconds is far above a real handshake even
// across continents and far below what an attacker would want a slot for.
const DefaultHandshakeTimeout = 10 * time.Second

// closeNotifyWait bounds how long closing a TLS connection may wait to
// send its close_notify alert: crypto/tls would wait up to 5s for a peer
// whose receive window is full, and the servers close connections under
// locks (a slow consumer is closed from the engine's output path).
const closeNotifyWait = 100 * time.Millisecond

// TLSListenerOptions configures a TLSListener.
type TLSListenerOptions struct {
	// HandshakeTimeout bounds each handshake. Default
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Log receives failed handshakes (at debug level: on a public port
	// they are scanners and plaintext clients, not news). Default
	// slog.Default().
	Log *slog.Logger
	// OnHandshakeError, when set, is called for each failed handshake,
	// for metrics.
	OnHandshakeError func(remote net.Addr, err error)
	// MaxHandshakes caps the handshakes in progress: past it a new
	// connection is closed at once, so a flood of silent connects costs
	// neither goroutines nor TLS work beyond the cap. 0: no cap.
	MaxHandshakes int
}

// TLSListener turns a net.Listener into one whose Accept returns
// connections that have completed a TLS handshake. Each handshake runs on
// its own goroutine under a deadline, so the server's accept loop is never
// held by a slow or silent client, and a failed handshake (plaintext, wrong
// CA, no client certificate, old TLS version) never reaches the protocol
// servers at all. A server given a TLSListener puts its connection limits
// on the raw listener beneath it, before the handshake (limitWith). The
// returned connections embed *tls.Conn (see TLSState) and are not
// *net.TCPConn, so GearmanServer serves them with goroutines rather than
// its epoll loop, which reads raw descriptors.
type TLSListener struct {
	inner net.Listener
	conf  *tls.Config
	opts  TLSListenerOptions

	ready chan net.Conn // handshaken connections for Accept
	errc  chan error    // the inner listener's final error
	done  chan struct{} // closed by Close

	// src is what the accept loop reads: inner, or inner capped by the
	// connection limits of the server serving the listener (limitWith).
	src   net.Listener
	guard *connGuard // nil until limitWith: limits and metrics from opts only
	start sync.Once  // starts the accept loop at the first Accept

	mu      sync.Mutex
	pending map[net.Conn]struct{} // guarded by mu: connections in handshake
	closed  bool                  // guarded by mu
	started bool                  // guarded by mu: the accept loop runs
	wg      sync.WaitGroup        // the accept goroutine and every handshake
	once    sync.Once
}

// NewTLSListener wraps inner, serving conf (typically
// tlsconf.Manager.ServerConfig). It starts accepting at the first Accept,
// so that a server given it can first put its connection limits on inner
// (they then apply before the handshake, see limitWith).
func NewTLSListener(inner net.Listener, conf *tls.Config, opts TLSListenerOptions) *TLSListener {
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	l := &TLSListener{
		inner:   inner,
		src:     inner,
		conf:    conf,
		opts:    opts,
		ready:   make(chan net.Conn),
		errc:    make(chan error, 1),
		done:    make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
	}
	return l
}

// Accept returns the next connection whose handshake succeeded.
func (l *TLSListener) Accept() (net.Conn, error) {
	l.start.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.closed {
			l.started = true
			l.wg.Add(1)
			go l.acceptLoop()
		}
	})
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		l.errc <- err // every later Accept gets it too
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and drops the handshakes in progress; connections
// already returned by Accept are the caller's.
func (l *TLSListener) Close() error {
	var err error
	l.once.Do(func() {
		err = l.inner.Close()
		l.mu.Lock()
		l.closed = true
		for c := range l.pending {
			c.Close()
		}
		l.mu.Unlock()
		close(l.done)
		l.wg.Wait()
	})
	return err
}

// Addr is the inner listener's address.
func (l *TLSListener) Addr() net.Addr { return l.inner.Addr() }

// acceptLoop accepts raw connections and starts their handshakes. It
// retries transient errors (out of descriptors) with a backoff, as the
// servers' own loops do, and hands any other error to Accept.
func (l *TLSListener) acceptLoop() {
	defer l.wg.Done()
	var delay time.Duration
	for {
		nc, err := l.src.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.opts.Log.Warn("tls accept", "err", err, "retry_in", delay)
				select {
				case <-time.After(delay):
				case <-l.done:
					return
				}
				continue
			}
			l.errc <- err
			return
		}
		delay = 0
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			nc.Close()
			return
		}
		if max := l.maxHandshakes(); max > 0 && len(l.pending) >= max {
			l.mu.Unlock()
			l.refuseHandshake(nc)
			continue
		}
		l.pending[nc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.handshake(nc)
	}
}

// handshake runs one server handshake and hands the connection to Accept.
func (l *TLSListener) handshake(nc net.Conn) {
	defer l.wg.Done()
	raw := &clampConn{Conn: nc}
	tc := tls.Server(raw, l.conf)
	_ = nc.SetDeadline(time.Now().Add(l.handshakeTimeout()))
	err := tc.Handshake()
	if err == nil {
		err = nc.SetDeadline(time.Time{})
	}
	l.mu.Lock()
	delete(l.pending, nc)
	l.mu.Unlock()
	if err != nil {
		l.opts.Log.Debug("tls handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close() // not tc.Close: no close_notify for a handshake that failed
		// Counted after the close, so a failure seen in the metrics has
		// freed its connection slot.
		l.handshakeFailed(nc.RemoteAddr(), err)
		return
	}
	c := &TLSConn{Conn: tc, raw: raw}
	select {
	case l.ready <- c:
	case <-l.done:
		c.Close()
	}
}

// TLSConn is a server connection returned by TLSListener.Accept: a
// *tls.Conn (ConnectionState, NetConn, ...) whose Close does not wait on a
// peer that stopped reading.
type TLSConn struct {
	*tls.Conn
	raw *clampConn
}

// Close sends close_notify if the peer takes it within closeNotifyWait,
// then closes the socket.
func (c *TLSConn) Close() error {
	// crypto/tls sets a 5s write deadline for the alert itself; the clamp
	// keeps ours.
	_ = c.raw.Conn.SetWriteDeadline(time.Now().Add(closeNotifyWait))
	c.raw.closing.Store(true)
	return c.Conn.Close()
}

// clampConn is the socket under a TLSConn: once the TLSConn is closing it
// ignores write deadlines, so the one Close set stays in force.
type clampConn struct {
	net.Conn
	closing atomic.Bool
}

// SetWriteDeadline sets the deadline unless the connection is closing.
func (c *clampConn) SetWriteDeadline(t time.Time) error {
	if c.closing.Load() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets both deadlines, the write one unless closing.
func (c *clampConn) SetDeadline(t time.Time) error {
	if c.closing.Load() {
		return c.Conn.SetReadDeadline(t)
	}
	return c.Conn.SetDeadline(t)
}
