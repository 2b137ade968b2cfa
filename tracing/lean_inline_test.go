package tracing

import (
	"context"
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

// TestInlineErrorNotRetried: a batch sent inline is not kept, so a
// retryable reply to it counts its spans as failed instead of sending it
// again.
func TestInlineErrorNotRetried(t *testing.T) {
	p, rc, _ := inlinePipe(t, 4, func(n int, w http.ResponseWriter, _ *http.Request) bool {
		if n >= 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	enqueueBatch(p, 4, 20)
	flush(t, p)
	enqueueBatch(p, 4, 20)
	flush(t, p)
	if p.inlined.Load() != 1 {
		t.Fatalf("%d batches sent inline, want 1", p.inlined.Load())
	}
	if reqs, _, _ := rc.got(); len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (no retry)", len(reqs))
	}
	if f := p.failed.Load(); f != 4 {
		t.Fatalf("%d spans failed, want 4", f)
	}
}

// TestInlineAfterClose: a receiver that closes the connection after each
// reply; the next batch cannot go inline on it and the export goroutine
// dials again. Nothing is lost or sent twice.
func TestInlineAfterClose(t *testing.T) {
	p, rc, cc := inlinePipe(t, 4, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("Connection", "close")
		return false
	})
	for range 5 {
		enqueueBatch(p, 4, 20)
		flush(t, p)
	}
	reqs, spans, err := rc.got()
	if len(reqs) != 5 || spans != 20 || err != nil {
		t.Fatalf("%d requests, %d spans, %v", len(reqs), spans, err)
	}
	if n := cc.count(); n != 5 {
		t.Fatalf("%d connections, want one per request", n)
	}
	if f := p.failed.Load(); f != 0 {
		t.Fatalf("%d spans failed", f)
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
	} {
		if got := replyComplete([]byte(c.reply)); got != c.want {
			t.Errorf("%q: %v, want %v", c.reply, got, c.want)
		}
	}
}
