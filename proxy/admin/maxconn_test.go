package admin

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestMaxConnections: past Options.MaxConnections a new admin connection is
// closed at once, before anything is read from it (so a flood of TLS
// handshakes cannot pile up either), and one is admitted again as soon as
// a held one closes.
func TestMaxConnections(t *testing.T) {
	srv := New(Options{Logger: quiet, MaxConnections: 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	addr := ln.Addr().String()
	dial := func() net.Conn {
		t.Helper()
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	held := []net.Conn{dial(), dial()} // silent: the server waits for their headers
	healthz := func() error {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}

	over := dial()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("third connection: read %d bytes, %v; want it closed (EOF)", n, err)
	}
	if err := healthz(); err == nil {
		t.Fatal("GET /healthz served with the cap already reached")
	}

	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := healthz()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /healthz after a held connection closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the server notices the close on its own read
	}
}
