package tracing

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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
// applies to the endpoint. A gzip body is sent with its length, where
// the OTLP client sends it chunked; receivers take both.
type connPoster struct {
	addr    string      // host:port to dial
	tls     *tls.Config // nil: plain TCP
	timeout time.Duration
	dialer  net.Dialer

	head  []byte // request line and headers up to the Content-Length value
	fixed int    // len(head) without the Content-Length value and blank line

	conn net.Conn // the connection requests go on: raw, or TLS over raw
	raw  net.Conn
	br   *bufio.Reader
	// pending is the span count of a request sent inline whose reply is
	// still to be read (lean_http_inline.go); 0: none.
	pending int
	peekBuf *[maxInlineReply]byte // replyWhole's scratch
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
	// Keys net/http leaves out of a request's header, as it writes them
	// itself from the request.
	h = h.Clone()
	for _, k := range []string{"Host", "Content-Length", "Transfer-Encoding", "Trailer"} {
		h.Del(k)
	}
	var b bytes.Buffer
	b.WriteString("POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + host + "\r\n")
	_ = h.Write(&b) // sorted, values cleaned of line breaks
	b.WriteString("Content-Length: ")
	c.head = b.Bytes()
	c.fixed = len(c.head)
	return c
}

// maxInformational caps the 1xx replies read before a request's reply.
const maxInformational = 5

// errReplyIncomplete marks a failure after which the connection's state
// is unknown.
var errReplyIncomplete = errors.New("tracing: OTLP reply incomplete")

// do posts body and reads the reply into reply, returning the reply's
// status and headers (its Body already read and closed). A kept-alive
// connection is checked before each request: one the receiver closed
// while idle is replaced rather than written to. A request is sent again,
// once, only if none of it was written, as net/http does for a POST: a
// receiver that read a batch and then failed may have kept it, and a
// second copy would show every span twice.
func (c *connPoster) do(ctx context.Context, body []byte, reply *bytes.Buffer) (*http.Response, error) {
	// One limit for the attempt, dial and handshake included, as
	// http.Client.Timeout bounds a whole request.
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	for {
		reused := c.conn != nil
		if reused && !c.idleAlive() {
			c.close()
			reused = false
		}
		if !reused {
			if err := c.dial(ctx); err != nil {
				return nil, err
			}
		}
		resp, wrote, err := c.exchange(ctx, body, reply)
		if err == nil {
			return resp, nil
		}
		c.close()
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
		if reused && !wrote {
			reply.Reset()
			continue
		}
		return nil, err
	}
}

// idleAlive reports whether the kept-alive connection is still open and
// quiet: a receiver that closed it while idle left an end of file (or a
// reset) to read, and bytes nobody asked for mean it is out of step or
// closing (a TLS receiver sends close_notify first; an HTTP one may send
// a 408). A TLS session ticket comes before the first reply and is read
// with it, so waiting bytes are never one.
func (c *connPoster) idleAlive() bool {
	return c.br.Buffered() == 0 && peekSocket(c.raw) == peekQuiet
}

// dial opens the connection, with the TLS handshake for https.
func (c *connPoster) dial(ctx context.Context) error {
	conn, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	c.raw = conn
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

// exchange writes one request and reads its reply. wrote reports
// whether any of the request was written, after which do must not send it
// again.
func (c *connPoster) exchange(ctx context.Context, body []byte, reply *bytes.Buffer) (resp *http.Response, wrote bool, err error) {
	deadline, _ := ctx.Deadline() // zero: none
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, false, err
	}
	defer c.cutOnDone(ctx)()
	conn := c.conn
	c.setHead(len(body))
	bufs := net.Buffers{c.head, body}
	if n, werr := bufs.WriteTo(conn); werr != nil {
		// A receiver may answer (413, 400, 401) and close before it read
		// the whole request: its reply, if it came, says more than the
		// write's error.
		resp, err = c.readReply(reply)
		if err != nil {
			return nil, n > 0, werr
		}
		c.close()
		return resp, true, nil
	}
	resp, err = c.readReply(reply)
	if err == nil && resp.Close {
		c.close()
	}
	return resp, true, err
}

// setHead completes the request head for a body of n bytes.
func (c *connPoster) setHead(n int) {
	c.head = strconv.AppendInt(c.head[:c.fixed], int64(n), 10)
	c.head = append(c.head, "\r\n\r\n"...)
}

// cutOnDone makes the connection's reads and writes fail at once when
// ctx ends (Shutdown giving up); stop, called when the attempt is over,
// closes the connection if that happened: a cancel that comes as the
// attempt ends may set its deadline late, on a connection the next batch
// would reuse.
func (c *connPoster) cutOnDone(ctx context.Context) (stop func()) {
	conn := c.conn
	fired := make(chan struct{})
	after := context.AfterFunc(ctx, func() {
		_ = conn.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	return func() {
		if !after() {
			<-fired
			if c.conn == conn {
				c.close()
			}
		}
	}
}

// readReply reads one reply into reply.
// Informational replies (1xx but 101) before it are skipped, as net/http's
// Transport does, up to a few.
func (c *connPoster) readReply(reply *bytes.Buffer) (*http.Response, error) {
	var resp *http.Response
	for informational := 0; ; informational++ {
		var err error
		resp, err = http.ReadResponse(c.br, nil)
		if err != nil {
			return nil, errors.Join(errReplyIncomplete, err)
		}
		if resp.StatusCode < 100 || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		_ = resp.Body.Close()
		if informational == maxInformational {
			return nil, fmt.Errorf("%w: more than %d informational replies", errReplyIncomplete, maxInformational)
		}
	}
	err := readReply(reply, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	return resp, nil
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
