package tracing

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// connPoster sends the lean path's OTLP/HTTP requests on one persistent
// HTTP/1.1 connection that the export goroutine writes and reads itself.
//
// Why not net/http: its client hands every request to a writer goroutine
// and gets the reply from a reader goroutine of the connection, so each
// batch woke three goroutines in turn, and copied the body through a
// 4 KiB buffer in 32 KiB reads. On a server whose Gearman or Beanstalk
// event loop is single-threaded, those wakeups cost more than their CPU:
// each one could take the loop's processor or thread from it while it
// waited in epoll, and the loop's latency per iteration is what limits
// throughput (docs/BENCHMARKS.md, "Tracing"). Here a batch is one writev
// of the request head and the encoded body, and one read of the reply, on
// the goroutine that encoded it.
//
// It speaks only what the OTLP receivers need: POST with Content-Length,
// any reply body (length, chunked or until close, through
// http.ReadResponse), keep-alive, TLS for https. Proxies and credentials
// in the URL are net/http's job: newHTTPSink uses this only when neither
// applies to the endpoint. A gzip body is sent with its length rather
// than chunked, as the OTLP client does; receivers take both.
type connPoster struct {
	addr    string      // host:port to dial
	tls     *tls.Config // nil: plain TCP
	timeout time.Duration
	dialer  net.Dialer

	head  []byte // request line and headers up to the Content-Length value
	fixed int    // len(head) without the Content-Length value and blank line

	conn net.Conn
	br   *bufio.Reader
}

// newConnPoster returns the poster for endpoint u with the request
// headers h, each attempt bounded by timeout (0: none), over TLS with
// conf for https.
func newConnPoster(u *url.URL, h http.Header, conf *tls.Config, timeout time.Duration) *connPoster {
	host := u.Host
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	c := &connPoster{
		addr:    net.JoinHostPort(u.Hostname(), port),
		timeout: timeout,
		dialer:  net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
	}
	if u.Scheme == "https" {
		c.tls = &tls.Config{}
		if conf != nil {
			c.tls = conf.Clone()
		}
		if c.tls.ServerName == "" {
			c.tls.ServerName = u.Hostname()
		}
		c.tls.NextProtos = []string{"http/1.1"}
	}
	var b bytes.Buffer
	b.WriteString("POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + host + "\r\n")
	_ = h.Write(&b) // sorted, values cleaned of line breaks
	b.WriteString("Content-Length: ")
	c.head = b.Bytes()
	c.fixed = len(c.head)
	return c
}

// errReplyIncomplete marks a failure after which the connection's state
// is unknown.
var errReplyIncomplete = errors.New("tracing: OTLP reply incomplete")

// do posts body and reads the reply into reply, returning the reply's
// status and headers (its Body already read and closed). A connection the
// receiver closed while idle fails before any reply byte: do then tries
// once more on a new one, as net/http does.
func (c *connPoster) do(ctx context.Context, body []byte, reply *bytes.Buffer) (*http.Response, error) {
	for {
		reused := c.conn != nil
		if !reused {
			if err := c.dial(ctx); err != nil {
				return nil, err
			}
		}
		resp, started, err := c.exchange(ctx, body, reply)
		if err == nil {
			return resp, nil
		}
		c.close()
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
		if reused && !started {
			reply.Reset()
			continue
		}
		return nil, err
	}
}

// dial opens the connection, with the TLS handshake for https.
func (c *connPoster) dial(ctx context.Context) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	conn, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	if c.tls != nil {
		tc := tls.Client(conn, c.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return err
		}
		conn = tc
	}
	c.conn = conn
	if c.br == nil {
		c.br = bufio.NewReaderSize(conn, 4096)
	} else {
		c.br.Reset(conn)
	}
	return nil
}

// exchange writes one request and reads its reply. started reports
// whether any of the reply arrived, after which a failure is not the
// stale connection do retries.
func (c *connPoster) exchange(ctx context.Context, body []byte, reply *bytes.Buffer) (resp *http.Response, started bool, err error) {
	deadline, ok := ctx.Deadline()
	if c.timeout > 0 {
		if d := time.Now().Add(c.timeout); !ok || d.Before(deadline) {
			deadline, ok = d, true
		}
	}
	if !ok {
		deadline = time.Time{}
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, false, err
	}
	// Cancelling ctx (Shutdown giving up) ends a write or read in
	// progress at once.
	conn := c.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.head = strconv.AppendInt(c.head[:c.fixed], int64(len(body)), 10)
	c.head = append(c.head, "\r\n\r\n"...)
	bufs := net.Buffers{c.head, body}
	if _, werr := bufs.WriteTo(conn); werr != nil {
		// A receiver may answer (413, 400, 401) and close before it read
		// the whole request: its reply, if it came, says more than the
		// write's error.
		resp, started, err = c.readReply(reply)
		if err != nil {
			return nil, started, werr
		}
		c.close()
		return resp, true, nil
	}
	resp, started, err = c.readReply(reply)
	if err == nil && resp.Close {
		c.close()
	}
	return resp, started, err
}

// readReply reads one reply into reply.
func (c *connPoster) readReply(reply *bytes.Buffer) (resp *http.Response, started bool, err error) {
	if _, err := c.br.Peek(1); err != nil {
		return nil, false, err
	}
	resp, err = http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, true, errors.Join(errReplyIncomplete, err)
	}
	err = readReply(reply, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, true, err
	}
	return resp, true, nil
}

// close drops the connection; the next request dials a new one.
func (c *connPoster) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// temporaryNetError reports whether err is a network error worth another
// attempt: a timeout (the attempt's deadline) or a temporary condition,
// as the OTLP client's url.Error.Temporary says for its transport.
func temporaryNetError(err error) bool {
	var ne net.Error
	if !errors.As(err, &ne) {
		return false
	}
	//lint:ignore SA1019 the OTLP client decides by Temporary too.
	return ne.Timeout() || ne.Temporary() //nolint:staticcheck
}
