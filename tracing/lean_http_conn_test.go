package tracing

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// connCounter counts the connections a test server accepted.
type connCounter struct {
	mu  sync.Mutex
	new int
}

func (c *connCounter) hook(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.mu.Lock()
		c.new++
		c.mu.Unlock()
	}
}

func (c *connCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.new
}

// countedReceiver starts a receiver whose connections are counted; it
// stops at the end of the test.
func countedReceiver(t *testing.T) (*receiver, *httptest.Server, *connCounter) {
	rc := &receiver{}
	srv := httptest.NewUnstartedServer(rc)
	cc := &connCounter{}
	srv.Config.ConnState = cc.hook
	srv.Start()
	t.Cleanup(srv.Close)
	return rc, srv, cc
}

// uploadSpans posts one batch of n spans through s.
func uploadSpans(t *testing.T, s *httpSink, enc *leanEncoder, n int) error {
	t.Helper()
	spans := make([]*leanSpan, n)
	for i := range spans {
		spans[i] = newTestSpan(20)
	}
	enc.encode(spans)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.uploadRequest(ctx, enc.request(), n)
}

// TestOTLPHTTPOneConnection: without a proxy the export goroutine posts
// every batch itself on one kept-alive connection (lean_http_conn.go), and
// the receiver gets each batch whole.
func TestOTLPHTTPOneConnection(t *testing.T) {
	clearHTTPEnv(t)
	rc, srv, cc := countedReceiver(t)
	s, err := newHTTPSink(srv.URL + "/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	if s.direct == nil {
		t.Fatal("no proxy applies, yet the sink posts through net/http")
	}
	enc := newLeanEncoder(nil, leanScope)
	for i := range 5 {
		if err := uploadSpans(t, s, &enc, 100*(i+1)); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	reqs, spans, err := rc.got()
	if len(reqs) != 5 || spans != 1500 || err != nil {
		t.Fatalf("%d requests, %d spans, %v; want 5 and 1500", len(reqs), spans, err)
	}
	if reqs[0].URL.Path != "/v1/traces" || reqs[0].ContentLength <= 0 {
		t.Fatalf("request %s with length %d", reqs[0].URL.Path, reqs[0].ContentLength)
	}
	if n := cc.count(); n != 1 {
		t.Fatalf("%d connections for 5 batches, want 1", n)
	}
}

// TestOTLPHTTPStaleConnection: a receiver that closes the kept-alive
// connection between batches (idle timeout, restart), or asks to close it
// in its reply, costs no batch: the next one goes on a new connection.
func TestOTLPHTTPStaleConnection(t *testing.T) {
	clearHTTPEnv(t)
	rc, srv, cc := countedReceiver(t)
	s, err := newHTTPSink(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	enc := newLeanEncoder(nil, leanScope)
	if err := uploadSpans(t, s, &enc, 10); err != nil {
		t.Fatal(err)
	}
	// The receiver drops the idle connection, and the sender sees it
	// before its next batch. (The kernel may deliver the close a little
	// later on a loaded machine: wait for it, as a batch sent meanwhile
	// may be lost, as with net/http.)
	srv.CloseClientConnections()
	waitIdleClosed(t, s)
	// From here on every reply says Connection: close. (Turned off while
	// the sender holds no connection: turning it off closes the server's
	// idle connections, and one it holds could go mid-batch.)
	srv.Config.SetKeepAlivesEnabled(false)
	for i := range 3 {
		if err := uploadSpans(t, s, &enc, 10); err != nil {
			t.Fatalf("upload %d after the receiver closed the idle connection, keep-alives off: %v", i, err)
		}
	}
	if reqs, spans, err := rc.got(); len(reqs) != 4 || spans != 40 || err != nil {
		t.Fatalf("%d requests, %d spans, %v; want 4 and 40", len(reqs), spans, err)
	}
	if n := cc.count(); n < 3 {
		t.Fatalf("%d connections, want a new one after each close", n)
	}
}

// TestOTLPHTTPNoReceiver: a refused connection fails the batch (counted),
// and the sender recovers once a receiver listens.
func TestOTLPHTTPNoReceiver(t *testing.T) {
	clearHTTPEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := newHTTPSink("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	s.retry = httpRetry{initial: time.Millisecond, max: time.Millisecond, elapsed: 20 * time.Millisecond}
	enc := newLeanEncoder(nil, leanScope)
	if err := uploadSpans(t, s, &enc, 3); err == nil {
		t.Fatal("upload to a closed port succeeded")
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	rc := &receiver{}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: rc}}
	srv.Start()
	defer srv.Close()
	if err := uploadSpans(t, s, &enc, 3); err != nil {
		t.Fatalf("once the receiver listens: %v", err)
	}
	if _, spans, err := rc.got(); spans != 3 || err != nil {
		t.Fatalf("%d spans, %v", spans, err)
	}
}

// TestOTLPHTTPUserInfoUsesClient: credentials in the endpoint URL are
// sent by net/http as basic auth, so such an endpoint keeps net/http.
func TestOTLPHTTPUserInfoUsesClient(t *testing.T) {
	clearHTTPEnv(t)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://otlp:secret@", 1)
	s, err := newHTTPSink(u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	if s.direct != nil {
		t.Fatal("an endpoint with credentials is posted to directly")
	}
	enc := newLeanEncoder(nil, leanScope)
	if err := uploadSpans(t, s, &enc, 2); err != nil {
		t.Fatal(err)
	}
	reqs, _, _ := rc.got()
	if user, pass, ok := reqs[0].BasicAuth(); len(reqs) != 1 || !ok || user != "otlp" || pass != "secret" {
		t.Fatalf("%d requests, basic auth %q %q %v", len(reqs), user, pass, ok)
	}
}

// TestOTLPHTTPNoResendAfterWrite: a receiver that reads a whole batch on
// the kept-alive connection and then drops the connection without a
// reply may have kept the batch, so it is not sent a second time there;
// the upload fails and the next batch goes on a new connection.
func TestOTLPHTTPNoResendAfterWrite(t *testing.T) {
	clearHTTPEnv(t)
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		if n == 2 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	s, err := newHTTPSink(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	s.retry = httpRetry{initial: time.Millisecond, max: time.Millisecond, elapsed: 20 * time.Millisecond}
	enc := newLeanEncoder(nil, leanScope)
	if err := uploadSpans(t, s, &enc, 3); err != nil {
		t.Fatal(err)
	}
	if err := uploadSpans(t, s, &enc, 3); err == nil {
		t.Fatal("a batch the receiver dropped without a reply counted as sent")
	}
	if err := uploadSpans(t, s, &enc, 3); err != nil {
		t.Fatalf("after the dropped connection: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 3 {
		t.Fatalf("the receiver got %d requests for 3 batches", requests)
	}
}
