package tracing

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"time"
)

// The httpSink side of inline sends (lean_inline.go). A request sent
// inline leaves its reply to be read later: by the next inline send once
// the whole reply is in the socket (so reading it cannot wait), or by the
// export goroutine before it uses the connection.

// errInlineReplyLost is the error for a batch sent inline whose
// connection closed before its reply could be read.
var errInlineReplyLost = errors.New("tracing: OTLP connection closed before the reply to a batch")

// maxInlineReply caps the reply an inline send reads itself; a longer one
// is left to the export goroutine.
const maxInlineReply = 4096

func (s *httpSink) inlineCapable() bool {
	return canWriteNow && s.direct != nil && s.direct.tls == nil && !s.gzip
}

func (s *httpSink) onReply(report func(n int, err error)) { s.report = report }

func (s *httpSink) tryInline(req []byte, n int) (written int, sent bool) {
	c := s.direct
	if c == nil || c.conn == nil || c.tls != nil || s.gzip || s.inlinePaused {
		return 0, false
	}
	// A deadline left from an earlier exchange may have passed: every
	// look at the socket would then fail without asking the kernel. Nothing
	// below waits, so none is needed.
	if err := c.conn.SetDeadline(time.Time{}); err != nil {
		return 0, false
	}
	if c.pending > 0 {
		if !c.replyWhole() {
			return 0, false
		}
		s.settleReply() // whole in the socket: reading it cannot wait
		if c.conn == nil || s.inlinePaused {
			return 0, false
		}
	}
	// Anything more to read means the receiver closed the connection
	// (after its reply, say) or is out of step: the export goroutine
	// replaces the connection.
	if c.br.Buffered() > 0 || peekSocket(c.raw) != peekQuiet {
		return 0, false
	}
	c.setHead(len(req))
	w, err := writeNow(c.raw, c.head, req)
	if err != nil {
		c.close() // nothing of this request went: the export goroutine sends it again
		return 0, false
	}
	if w == len(c.head)+len(req) {
		c.pending = n
		return w, true
	}
	return w, false
}

func (s *httpSink) finishInline(ctx context.Context, req []byte, written, n int) error {
	c := s.direct
	if written == 0 {
		return s.uploadRequest(ctx, req, n)
	}
	if c.conn == nil {
		return errInlineReplyLost
	}
	// The rest of the request, after the part that went: c.head is still
	// the head tryInline wrote.
	done, err := c.attempt(ctx)
	defer done()
	if err != nil {
		return err
	}
	rest := net.Buffers{c.head, req}
	for written > 0 {
		k := min(written, len(rest[0]))
		rest[0] = rest[0][k:]
		written -= k
		if len(rest[0]) == 0 {
			rest = rest[1:]
		}
	}
	if _, err := rest.WriteTo(c.conn); err != nil {
		c.close()
		return err
	}
	c.pending = n
	return s.replyErr()
}

func (s *httpSink) settle(ctx context.Context) {
	c := s.direct
	if c == nil || c.pending == 0 {
		return
	}
	if c.conn != nil {
		done, _ := c.attempt(ctx) // on an error the connection is gone: settleReply reports the loss
		defer done()
	}
	s.settleReply()
}

// attempt bounds the connection's reads and writes until done by ctx and
// by the sink's time for one attempt, as do does. On an error the
// connection is closed.
func (c *connPoster) attempt(ctx context.Context) (done func(), err error) {
	cancel := context.CancelFunc(func() {})
	if c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	stop := c.cutOnDone(ctx)
	done = func() { stop(); cancel() }
	deadline, _ := ctx.Deadline()
	if err := c.conn.SetDeadline(deadline); err != nil {
		c.close()
		return done, err
	}
	return done, nil
}

// settleReply reads the reply to the request sent inline and reports it.
func (s *httpSink) settleReply() {
	n := s.direct.pending
	if err := s.replyErr(); s.report != nil {
		s.report(n, err)
	}
}

// replyErr reads the reply to the pending request and returns its error;
// the request is no longer pending after it.
func (s *httpSink) replyErr() error {
	c := s.direct
	c.pending = 0
	if c.conn == nil {
		return errInlineReplyLost
	}
	s.reply.Reset()
	resp, err := c.readReply(&s.reply)
	if err != nil {
		c.close()
		return err
	}
	if resp.Close {
		c.close()
	}
	_, err = s.status(resp, s.reply.Bytes())
	var rerr retryable
	if errors.As(err, &rerr) {
		// Not retried: the batch was not kept. The receiver asks to be
		// sent less, so the next batches go the export goroutine's way,
		// with its retries and back-off, until one of them succeeds.
		s.inlinePaused = true
		err = rerr.err
	}
	return err
}

// replyWhole reports whether the whole reply to the pending request is
// buffered or in the socket, so that reading it cannot wait: a final
// status (not 1xx) with a Content-Length, its headers and body within
// maxInlineReply bytes. Anything else (chunked, longer, 1xx first) is
// read by the export goroutine.
func (c *connPoster) replyWhole() bool {
	if c.peekBuf == nil {
		c.peekBuf = new([maxInlineReply]byte)
	}
	buf := c.peekBuf[:]
	have := copy(buf, peekBuffered(c))
	if have < len(buf) {
		k, ok := peekAvailable(c.raw, buf[have:])
		if !ok {
			return false
		}
		have += k
	}
	return replyComplete(buf[:have])
}

// peekBuffered returns what the reply reader holds already.
func peekBuffered(c *connPoster) []byte {
	b, _ := c.br.Peek(c.br.Buffered())
	return b
}

// replyComplete reports whether b begins with a whole HTTP/1.x reply of
// a final status whose body length its Content-Length gives.
func replyComplete(b []byte) bool {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 || !bytes.HasPrefix(b, []byte("HTTP/1.")) || len(b) < 12 || b[9] < '2' || b[9] > '5' {
		return false
	}
	head := b[:end+2]
	if bytes.Count(head, []byte("\n")) != bytes.Count(head, []byte("\r\n")) {
		return false // a bare line feed: net/http may end the head earlier
	}
	length := -1
	for line := range bytes.SplitSeq(head, []byte("\r\n")) {
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			return false // a folded line continues the header before it
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")): // only as net/http reads it
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil || n < 0 || length >= 0 {
				return false
			}
			length = n
		case bytes.EqualFold(bytes.TrimSpace(k), []byte("Transfer-Encoding")):
			return false
		}
	}
	return length >= 0 && len(b) >= end+4+length
}
