package tracing

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// smallBuffers makes a socket's buffers a few KiB, so that a large request
// cannot all go at once while the receiver does not read.
func smallBuffers(_, _ string, c syscall.RawConn) error {
	var err error
	cerr := c.Control(func(fd uintptr) {
		if err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096); err == nil {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// TestInlinePartialWrite: a batch larger than the socket takes goes in
// part inline and the export goroutine writes the rest (and reads the
// reply) once the receiver reads again: the receiver gets it whole, once.
func TestInlinePartialWrite(t *testing.T) {
	clearHTTPEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
	hold := make(chan struct{})
	rc := &receiver{reply: func(n int, _ http.ResponseWriter, _ *http.Request) bool {
		if n >= 1 {
			<-hold // before reading the body
		}
		return false
	}}
	ln, err := (&net.ListenConfig{Control: smallBuffers}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: rc}}
	srv.Start()
	t.Cleanup(srv.Close)
	s, err := newHTTPSink(srv.URL + "/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	s.direct.dialer.Control = smallBuffers
	const batch = 64
	p := newLeanPipe(nil, newLeanEncoder(nil, leanScope), s, batch, false)
	p.allowInline(true)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.shutdown(ctx)
	}()
	enqueueBatch(p, batch, 20)
	flush(t, p)                    // opens the connection
	enqueueBatch(p, batch, 16<<10) // about 1 MiB
	if p.handed.Load() != 1 || p.inlined.Load() != 0 {
		close(hold)
		t.Fatalf("inline sends: %d whole, %d in part; want the large one in part", p.inlined.Load(), p.handed.Load())
	}
	close(hold)
	flush(t, p)
	reqs, spans, err := rc.got()
	if len(reqs) != 2 || spans != 2*batch || err != nil {
		t.Fatalf("%d requests, %d spans, %v", len(reqs), spans, err)
	}
	if f, d := p.failed.Load(), p.dropped.Load(); f+d != 0 {
		t.Fatalf("failed %d, dropped %d", f, d)
	}
}
