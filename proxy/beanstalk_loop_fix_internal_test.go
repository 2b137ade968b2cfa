//go:build linux

package proxy

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestBeanstalkLoopSignalAfterExit: a signal that comes after the loop
// has exited (a late hold timer or notify) queues nothing: nobody would
// ever take it off the queue.
func TestBeanstalkLoopSignalAfterExit(t *testing.T) {
	srv, err := NewBeanstalkServer(BeanstalkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The loop starts with the first connection.
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte("list-tube-used\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	l := srv.loop
	srv.mu.Unlock()
	if l == nil {
		t.Fatal("no event loop")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-served
	l.signal(&bloopConn{l: l})
	l.mu.Lock()
	n := len(l.ready)
	l.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d connections queued on an exited loop, want none", n)
	}
}
