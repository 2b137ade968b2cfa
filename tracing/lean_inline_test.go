package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// inlinePipe returns a pipe of batches of batch spans exporting to a
// fresh receiver (whose reply, if set, chooses answers), and the receiver.
func inlinePipe(t *testing.T, batch int, reply func(n int, w http.ResponseWriter, r *http.Request) bool) (*leanPipe, *receiver, *connCounter) {
	t.Helper()
	clearHTTPEnv(t)
	return inlinePipeEnv(t, batch, reply)
}

// inlinePipeEnv is inlinePipe with the environment as the test set it.
func inlinePipeEnv(t *testing.T, batch int, reply func(n int, w http.ResponseWriter, r *http.Request) bool) (*leanPipe, *receiver, *connCounter) {
	t.Helper()
	if !canWriteNow {
		t.Skip("no inline sends on this platform")
	}
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000") // only full batches and flushes export
	rc := &receiver{reply: reply}
	srv := httptest.NewUnstartedServer(rc)
	cc := &connCounter{}
	srv.Config.ConnState = cc.hook
	srv.Start()
	t.Cleanup(srv.Close)
	s, err := newHTTPSink(srv.URL + "/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	p := newLeanPipe(nil, newLeanEncoder(nil, leanScope), s, batch, false)
	p.allowInline(true)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.shutdown(ctx)
	})
	if p.inl == nil {
		t.Fatal("a plain http endpoint, yet no inline sends")
	}
	return p, rc, cc
}

// enqueueBatch ends n spans of size bytes into p from the test's goroutine.
func enqueueBatch(p *leanPipe, n, size int) {
	for range n {
		p.enqueue(newTestSpan(size))
	}
}

// flush is forceFlush bounded in time.
func flush(t *testing.T, p *leanPipe) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.forceFlush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestInlineSendsBatches: once the connection is open and idle, the
// goroutine that fills a batch sends it itself; every span arrives once,
// on one connection.
func TestInlineSendsBatches(t *testing.T) {
	p, rc, cc := inlinePipe(t, 4, nil)
	for range 10 {
		enqueueBatch(p, 4, 20)
		flush(t, p) // the reply is read: the next batch finds the connection idle
	}
	reqs, spans, err := rc.got()
	if len(reqs) != 10 || spans != 40 || err != nil {
		t.Fatalf("%d requests, %d spans, %v; want 10, 40", len(reqs), spans, err)
	}
	// The first batch opens the connection on the export goroutine.
	if got := p.inlined.Load(); got != 9 {
		t.Fatalf("%d batches sent inline, want 9", got)
	}
	if n := cc.count(); n != 1 {
		t.Fatalf("%d connections", n)
	}
	if d, f := p.dropped.Load(), p.failed.Load(); d+f != 0 {
		t.Fatalf("dropped %d, failed %d", d, f)
	}
}

// TestInlineNeverWaits: while the receiver holds its replies, batches keep
// filling and ending spans never waits for it: an inline send whose
// previous reply has not come leaves the batch to the export goroutine,
// and a full queue drops. Once the receiver answers, every span not
// dropped arrives.
func TestInlineNeverWaits(t *testing.T) {
	hold := make(chan struct{})
	p, rc, _ := inlinePipe(t, 4, func(n int, _ http.ResponseWriter, _ *http.Request) bool {
		if n >= 1 {
			<-hold
		}
		return false
	})
	enqueueBatch(p, 4, 20)
	flush(t, p)
	done := make(chan struct{})
	go func() {
		defer close(done)
		enqueueBatch(p, 4, 20) // inline; its reply is held
		enqueueBatch(p, 400, 20)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		close(hold)
		t.Fatal("ending spans waited for the receiver")
	}
	if p.inlined.Load() != 1 {
		t.Fatalf("%d batches sent inline, want the one after the flush", p.inlined.Load())
	}
	close(hold)
	flush(t, p)
	_, spans, err := rc.got()
	if err != nil {
		t.Fatal(err)
	}
	if d, f := p.dropped.Load(), p.failed.Load(); uint64(spans)+d != 408 || f != 0 {
		t.Fatalf("%d spans arrived, %d dropped, %d failed; of 408", spans, d, f)
	}
}

// TestInlineAfterClose: the receiver closes the connection with its
// reply to a batch sent inline; the next batch cannot go on it, and the
// export goroutine dials again. Nothing is lost or sent twice.
func TestInlineAfterClose(t *testing.T) {
	p, rc, cc := inlinePipe(t, 4, func(n int, w http.ResponseWriter, _ *http.Request) bool {
		if n == 1 {
			w.Header().Set("Connection", "close")
		}
		return false
	})
	enqueueBatch(p, 4, 20)
	flush(t, p)
	enqueueBatch(p, 4, 20) // inline; the reply closes the connection
	waitReplyWhole(t, p)
	enqueueBatch(p, 4, 20) // reads that reply: the connection is gone
	flush(t, p)
	reqs, spans, err := rc.got()
	if len(reqs) != 3 || spans != 12 || err != nil {
		t.Fatalf("%d requests, %d spans, %v", len(reqs), spans, err)
	}
	if p.inlined.Load() != 1 {
		t.Fatalf("%d batches sent inline, want 1", p.inlined.Load())
	}
	if n := cc.count(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	if f := p.failed.Load(); f != 0 {
		t.Fatalf("%d spans failed", f)
	}
}

// waitReplyWhole waits until the reply to the batch sent inline is whole
// in the socket, as the next inline send needs it to read it.
func waitReplyWhole(t *testing.T, p *leanPipe) {
	t.Helper()
	c := p.sink.(*httpSink).direct
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.syncMu.Lock()
		whole := c.pending == 0 || c.replyWhole()
		p.syncMu.Unlock()
		if whole {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no reply to the batch sent inline after 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestInlineBackToBack: with no flush between batches, each inline send
// reads the reply to the one before it and sends on the same connection.
func TestInlineBackToBack(t *testing.T) {
	p, rc, cc := inlinePipe(t, 4, nil)
	enqueueBatch(p, 4, 20)
	flush(t, p)
	for range 9 {
		enqueueBatch(p, 4, 20)
		waitReplyWhole(t, p)
	}
	if got := p.inlined.Load(); got != 9 {
		t.Fatalf("%d batches sent inline, want 9", got)
	}
	flush(t, p)
	reqs, spans, err := rc.got()
	if len(reqs) != 10 || spans != 40 || err != nil {
		t.Fatalf("%d requests, %d spans, %v", len(reqs), spans, err)
	}
	if n, f := cc.count(), p.failed.Load(); n != 1 || f != 0 {
		t.Fatalf("%d connections, %d spans failed", n, f)
	}
}

// TestInlineOutOfStep: bytes after the reply to a batch sent inline (a
// receiver closing, or out of step) keep the next batch off that
// connection: the export goroutine replaces it, and no batch is lost.
func TestInlineOutOfStep(t *testing.T) {
	p, rc, cc := inlinePipe(t, 4, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n != 1 {
			return false
		}
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return false
		}
		// The reply, then bytes nobody asked for, in one write.
		_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nXYZ"))
		return true // the connection stays open, never read again
	})
	enqueueBatch(p, 4, 20)
	flush(t, p)
	enqueueBatch(p, 4, 20) // inline: answered, then XYZ
	waitReplyWhole(t, p)
	enqueueBatch(p, 4, 20)
	flush(t, p)
	if p.inlined.Load() != 1 {
		t.Fatalf("%d batches sent inline, want 1", p.inlined.Load())
	}
	if reqs, spans, _ := rc.got(); len(reqs) != 3 || spans != 8 {
		// The hijacked request's spans are not decoded by the receiver.
		t.Fatalf("%d requests, %d spans decoded; want 3, 8", len(reqs), spans)
	}
	if n, f := cc.count(), p.failed.Load(); n != 2 || f != 0 {
		t.Fatalf("%d connections, %d spans failed; want 2, 0", n, f)
	}
}

// TestInlineRetryableReply: a batch sent inline is not kept, so a
// retryable reply to it counts its spans as failed instead of sending it
// again; the next batch goes the export goroutine's way (with its
// retries), and once that succeeds, batches go inline again.
func TestInlineRetryableReply(t *testing.T) {
	p, rc, _ := inlinePipe(t, 4, func(n int, w http.ResponseWriter, _ *http.Request) bool {
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	for range 4 {
		enqueueBatch(p, 4, 20)
		flush(t, p)
	}
	if got := p.inlined.Load(); got != 2 {
		t.Fatalf("%d batches sent inline, want 2 (the second and the fourth)", got)
	}
	if reqs, spans, _ := rc.got(); len(reqs) != 4 || spans != 12 {
		t.Fatalf("%d requests, %d spans; want 4, 12 (no retry)", len(reqs), spans)
	}
	if f := p.failed.Load(); f != 4 {
		t.Fatalf("%d spans failed, want 4", f)
	}
}

// TestInlineReplyNeverComes: without a time limit per attempt
// (OTEL_EXPORTER_OTLP_TIMEOUT=0), a flush still ends at the export's
// time limit when the reply to a batch sent inline never comes, counting
// it as failed.
func TestInlineReplyNeverComes(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "200")
	p, _, _ := inlinePipeEnv(t, 4, func(n int, _ http.ResponseWriter, _ *http.Request) bool {
		if n >= 1 {
			<-hold
		}
		return false
	})
	enqueueBatch(p, 4, 20)
	flush(t, p)
	enqueueBatch(p, 4, 20) // inline; never answered
	flush(t, p)
	if p.inlined.Load() != 1 || p.failed.Load() != 4 {
		t.Fatalf("%d batches sent inline, %d spans failed; want 1, 4", p.inlined.Load(), p.failed.Load())
	}
}

// TestInlineAfterDeadline: a deadline an earlier exchange left on the
// connection, now past, does not keep a batch from going inline.
func TestInlineAfterDeadline(t *testing.T) {
	p, _, cc := inlinePipe(t, 4, nil)
	enqueueBatch(p, 4, 20)
	flush(t, p)
	p.syncMu.Lock()
	_ = p.sink.(*httpSink).direct.conn.SetDeadline(time.Unix(1, 0))
	p.syncMu.Unlock()
	enqueueBatch(p, 4, 20)
	flush(t, p)
	if p.inlined.Load() != 1 || cc.count() != 1 {
		t.Fatalf("%d batches sent inline on %d connections; want 1, 1", p.inlined.Load(), cc.count())
	}
}

// TestInlineOnlyWherePossible: the provider sends inline to a plain
// OTLP/HTTP endpoint, unless tracing.export_off_loop says not to; never
// with gzip or over TLS, where encoding and sending are not one write.
func TestInlineOnlyWherePossible(t *testing.T) {
	if !canWriteNow {
		t.Skip("no inline sends on this platform")
	}
	clearHTTPEnv(t)
	for _, c := range []struct {
		name     string
		endpoint string
		offLoop  bool
		gzip     bool
		want     bool
	}{
		{"plain", "http://127.0.0.1:9/v1/traces", false, false, true},
		{"off loop", "http://127.0.0.1:9/v1/traces", true, false, false},
		{"gzip", "http://127.0.0.1:9/v1/traces", false, true, false},
		{"tls", "https://127.0.0.1:9/v1/traces", false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.gzip {
				t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
			}
			p, err := New(context.Background(), Config{Enabled: true, Endpoint: c.endpoint, ExportOffLoop: c.offLoop})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if got := p.lean.inl != nil; got != c.want {
				t.Fatalf("inline sends: %v, want %v", got, c.want)
			}
		})
	}
}

// TestReplyComplete: an inline send reads a reply itself only when all of
// it is there and its length is known.
func TestReplyComplete(t *testing.T) {
	for _, c := range []struct {
		reply string
		want  bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\ncontent-length: 3\r\n\r\nabc", true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n", false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\n\r\n", false},
		{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false},
		{"SSH-2.0\r\n\r\n", false},
		{"HTTP/1.0 000 \r\nContent-Length: 0\r\n\r\n", false},
		{"HTTP/1.0 200 OK\r\n\nContent-Length: 0\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nX: a\r\n Content-Length: 0\r\n\r\n", false},
		{"HTTP/1.0 200 OK\r\nContent-Length : 0\r\n\r\n", false},
	} {
		if got := replyComplete([]byte(c.reply)); got != c.want {
			t.Errorf("%q: %v, want %v", c.reply, got, c.want)
		}
	}
}
