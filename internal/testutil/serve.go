package testutil

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// ShutdownTimeout bounds how long a test server may take to shut down at
// the end of a test, so a stuck drain fails the test instead of hanging it.
const ShutdownTimeout = 5 * time.Second

// Server is what the in-process Gearman and Beanstalk servers offer a test.
type Server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// Listen opens a fresh 127.0.0.1 port, closed when the test ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Serve runs srv on a fresh 127.0.0.1 port until the test ends and returns
// its address.
func Serve(t testing.TB, srv Server) string {
	t.Helper()
	addr, _ := ServeOn(t, srv, Listen(t))
	return addr
}

// ServeOn runs srv on l (a TLS or wrapped listener) and returns its address
// and a stop that shuts it down, reporting shutdown and Serve errors. Stop
// runs at the end of the test too; only its first call acts, so a test may
// stop a server early (to restart it on the same journal) without care.
func ServeOn(t testing.TB, srv Server, l net.Listener) (addr string, stop func()) {
	t.Helper()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return l.Addr().String(), stop
}
