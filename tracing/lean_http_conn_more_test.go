package tracing

import (
	"bufio"
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
)

// waitIdleClosed waits until the sender sees that the receiver closed its
// kept-alive connection (the kernel may deliver the close a little later
// on a loaded machine).
func waitIdleClosed(t *testing.T, s *httpSink) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.direct.idleAlive(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sender never saw the receiver close the connection")
		}
	}
}

// TestOTLPHTTPTLSIdleClose: a TLS receiver's idle timeout, which sends
// close_notify before closing, costs no batch: the sender sees the
// waiting alert and dials again instead of writing the next batch there.
func TestOTLPHTTPTLSIdleClose(t *testing.T) {
	clearHTTPEnv(t)
	rc := &receiver{}
	srv := httptest.NewUnstartedServer(rc)
	srv.Config.IdleTimeout = 100 * time.Millisecond
	var cc connCounter
	srv.Config.ConnState = cc.hook
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", testutil.WriteFile(t, t.TempDir(), "ca.pem", ca))
	s, err := newHTTPSink(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	if s.direct == nil || s.direct.tls == nil {
		t.Fatal("the sink does not post over its own TLS connection")
	}
	enc := newLeanEncoder(nil, leanScope)
	if err := uploadSpans(t, s, &enc, 5); err != nil {
		t.Fatal(err)
	}
	waitIdleClosed(t, s)
	if err := uploadSpans(t, s, &enc, 5); err != nil {
		t.Fatalf("after the receiver's idle timeout: %v", err)
	}
	if reqs, spans, err := rc.got(); len(reqs) != 2 || spans != 10 || err != nil {
		t.Fatalf("%d requests, %d spans, %v; want 2 and 10", len(reqs), spans, err)
	}
	if n := cc.count(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// TestOTLPHTTPInformational: 1xx replies before the real one are skipped,
// as net/http does, and the connection stays in step for the next batch.
func TestOTLPHTTPInformational(t *testing.T) {
	clearHTTPEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan int, 1)
	go func() {
		n := 0
		defer func() { served <- n }()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		for i := range 2 {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			n++
			reply := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
			if i == 0 {
				reply = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + reply
			} else {
				reply = "HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\nno"
			}
			if _, err := io.WriteString(conn, reply); err != nil {
				return
			}
		}
	}()
	s, err := newHTTPSink("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	enc := newLeanEncoder(nil, leanScope)
	if err := uploadSpans(t, s, &enc, 2); err != nil {
		t.Fatalf("a 200 after two informational replies: %v", err)
	}
	// The second batch must read its own reply, not a leftover of the first.
	if err := uploadSpans(t, s, &enc, 2); err == nil {
		t.Fatal("the second batch read a reply that was not its own")
	}
	ln.Close()
	if n := <-served; n != 2 {
		t.Fatalf("the receiver got %d requests, want 2", n)
	}
}

// TestOTLPHTTPHostHeader: a Host (or Content-Length) in
// OTEL_EXPORTER_OTLP_HEADERS is left out, as net/http does, instead of
// making every request malformed.
func TestOTLPHTTPHostHeader(t *testing.T) {
	clearHTTPEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Host=collector.example,Content-Length=3,tenant=blue")
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s, err := newHTTPSink(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	enc := newLeanEncoder(nil, leanScope)
	if err := uploadSpans(t, s, &enc, 4); err != nil {
		t.Fatal(err)
	}
	reqs, spans, err := rc.got()
	if len(reqs) != 1 || spans != 4 || err != nil {
		t.Fatalf("%d requests, %d spans, %v; want 1 and 4", len(reqs), spans, err)
	}
	if r := reqs[0]; r.Host != srv.Listener.Addr().String() || r.Header.Get("tenant") != "blue" {
		t.Fatalf("Host %q, tenant %q", r.Host, r.Header.Get("tenant"))
	}
}
