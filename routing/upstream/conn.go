// Package upstream implements routing's backend interfaces over TCP (and
// optionally TLS) to real gearmand and beanstalkd servers: one connection
// per backend session, a reader goroutine per connection, requests written
// by the caller through a buffer it flushes per batch. A Gearman session
// over plain TCP can instead be served by the caller's epoll loop
// (Gearman.OpenLoop, gearman_loop_linux.go): no goroutine, non-blocking
// writes, and the I/O timeout checked by the loop's sweep, where a write
// times out when queued output made no progress for IOTimeout.
//
// Timeouts: a request that the server answers at once (everything but a
// blocking reserve and a job's run) must see its answer, or at least some
// traffic, within Config.IOTimeout, and a write must finish within it;
// otherwise the session fails with a *routing.TransportError wrapping
// routing.ErrTimeout or the write error. An idle session (a sleeping worker,
// a client waiting for its job) has no deadline: TCP keepalive finds dead
// peers there.
//
// Failure: a broken connection, a timeout or garbage from the server ends
// the session once: every pending callback gets the error, then the
// owner's closed callback runs. Close ends it quietly.
package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/jobgate/jobgate/routing"
)

// DefaultDialTimeout bounds connecting when Config.DialTimeout is zero.
const DefaultDialTimeout = 2 * time.Second

// Config is how to reach one upstream server.
type Config struct {
	// Addr is the server's host:port.
	Addr string
	// TLS, when not nil, wraps the connection in TLS with this
	// configuration (ServerName defaults to Addr's host).
	TLS *tls.Config
	// DialTimeout bounds connecting, TLS handshake included. Zero means
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// IOTimeout bounds waiting for the answer to a request that should
	// be answered at once, and each write. Zero means no limit.
	IOTimeout time.Duration
	// KeepAlive is the TCP keepalive period, as net.Dialer.KeepAlive: zero
	// means the system default (enabled), negative disables it.
	KeepAlive time.Duration
}

func (c *Config) check() error {
	if c.Addr == "" {
		return errors.New("upstream: no address")
	}
	if c.DialTimeout < 0 || c.IOTimeout < 0 {
		return errors.New("upstream: " + c.Addr + ": negative timeout")
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	return nil
}

// dial connects to the server within ctx and the dial timeout. Its errors
// are *routing.TransportError, so the breaker counts them.
func (c *Config) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{Timeout: c.DialTimeout, KeepAlive: c.KeepAlive}
	var nc net.Conn
	var err error
	if c.TLS != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: c.TLS}).DialContext(ctx, "tcp", c.Addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", c.Addr)
	}
	if err != nil {
		return nil, &routing.TransportError{Backend: c.Addr, Op: "dial", Err: err}
	}
	return nc, nil
}

// ioDeadline is when an answer expected from now on is late, or the zero
// time when there is no limit.
func (c *Config) ioDeadline(extra time.Duration) time.Time {
	if c.IOTimeout == 0 {
		return time.Time{}
	}
	return time.Now().Add(c.IOTimeout + extra)
}

// isTimeout reports whether err is a read or write deadline expiring.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
