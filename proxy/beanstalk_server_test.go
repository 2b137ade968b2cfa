package proxy_test

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/proxy"
)

// Behaviour of the jobgate server itself, beyond what transcripts shared
// with beanstalkd can show.

// TestBeanstalkServerTTRIdle: the TTR runs out on time even when the
// reserving connection sends nothing more (beanstalkd 1.12 can miss it).
func TestBeanstalkServerTTRIdle(t *testing.T) { bsBothPaths(t, testBeanstalkServerTTRIdle) }

func testBeanstalkServerTTRIdle(t *testing.T) {
	t.Parallel()
	srv := bsStartJobgate(t, 0)
	c := bsDial(t, srv.addr)
	c.send(t, "put 0 0 1 1\r\na\r\nreserve\r\n")
	c.expect(t, "INSERTED 1\r\nRESERVED 1 1\r\na\r\n", "reserve")
	start := time.Now()
	o := bsDial(t, srv.addr)
	for {
		o.send(t, "peek-ready\r\n")
		if o.readReply(t) == "FOUND 1 1\r\na\r\n" {
			break
		}
		if time.Since(start) > 3*time.Second {
			t.Fatal("TTR of 1 s not enforced within 3 s on an idle connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBeanstalkServerFlushBeforePartialCommand: replies go out before the
// server blocks in the middle of a command.
func TestBeanstalkServerFlushBeforePartialCommand(t *testing.T) {
	bsBothPaths(t, testBeanstalkServerFlushBeforePartialCommand)
}

func testBeanstalkServerFlushBeforePartialCommand(t *testing.T) {
	t.Parallel()
	srv := bsStartJobgate(t, 0)
	c := bsDial(t, srv.addr)
	c.send(t, "list-tube-used\r\nput 0 0 10 5\r\n")
	c.expect(t, "USING default\r\n", "reply before the body arrives")
	c.send(t, "hello\r\n")
	c.expect(t, "INSERTED 1\r\n", "put")
}

// bsCountingListener counts the writes of the connections it accepts.
type bsCountingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *bsCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &bsCountingConn{Conn: c, n: &l.writes}, nil
}

type bsCountingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *bsCountingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}

// TestBeanstalkServerPipelinedFlush: pipelined commands are answered in a
// few large writes, not one write per reply.
func TestBeanstalkServerPipelinedFlush(t *testing.T) {
	t.Parallel()
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &bsCountingListener{Listener: inner}
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())

	c := bsDial(t, inner.Addr().String())
	const n = 100
	c.send(t, strings.Repeat("put 0 0 10 3\r\nabc\r\n", n))
	var want strings.Builder
	for i := 1; i <= n; i++ {
		want.WriteString("INSERTED {n}\r\n")
	}
	c.expect(t, want.String(), "pipelined puts")
	if w := l.writes.Load(); w > 5 {
		t.Fatalf("%d writes for %d pipelined replies, want a handful", w, n)
	}
}

// TestBeanstalkServerHangupWhileWaiting: a client that hangs up during a
// blocking reserve does not swallow the next job.
func TestBeanstalkServerHangupWhileWaiting(t *testing.T) {
	bsBothPaths(t, testBeanstalkServerHangupWhileWaiting)
}

func testBeanstalkServerHangupWhileWaiting(t *testing.T) {
	t.Parallel()
	srv := bsStartJobgate(t, 0)
	w := bsDial(t, srv.addr)
	w.send(t, "reserve\r\n")
	w.expectQuiet(t, "waiting")
	w.nc.Close()
	p := bsDial(t, srv.addr)
	p.send(t, "put 0 0 10 1\r\na\r\n")
	p.expect(t, "INSERTED 1\r\n", "put")
	deadline := time.Now().Add(bsReplyTimeout)
	for {
		p.send(t, "stats-job 1\r\n")
		if strings.Contains(p.readReply(t), "\nstate: ready\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("job not ready after its waiter hung up")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBeanstalkServerShutdown: Shutdown ends promptly with a client blocked
// in reserve, and Serve returns nil.
func TestBeanstalkServerShutdown(t *testing.T) { bsBothPaths(t, testBeanstalkServerShutdown) }

func testBeanstalkServerShutdown(t *testing.T) {
	t.Parallel()
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{Goroutines: bsGoroutines(t)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	c := bsDial(t, l.Addr().String())
	c.send(t, "reserve\r\n")
	c.expectQuiet(t, "waiting")
	if got := srv.Addr().String(); got != l.Addr().String() {
		t.Fatalf("Addr() = %s, want %s", got, l.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	c.expectEOF(t, "after shutdown")
}

// TestBeanstalkServerGoroutinesPerWaiter: a blocking reserve costs its
// connection's goroutine and nothing more (no goroutine or clock timer per
// waiting reserve or per job).
func TestBeanstalkServerGoroutinesPerWaiter(t *testing.T) {
	bsBothPaths(t, testBeanstalkServerGoroutinesPerWaiter)
}

func testBeanstalkServerGoroutinesPerWaiter(t *testing.T) {
	srv := bsStartJobgate(t, 0)
	base := runtime.NumGoroutine()
	const n = 50
	var conns []*bsConn
	for range n {
		c := bsDial(t, srv.addr)
		defer c.nc.Close()
		c.send(t, "put 0 100 100 1\r\nx\r\nreserve-with-timeout 100\r\n")
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.expect(t, "INSERTED {n}\r\n", "put")
	}
	conns[0].expectQuiet(t, "waiting")
	if got := runtime.NumGoroutine() - base; got > n+5 {
		t.Fatalf("%d goroutines for %d waiting connections with %d delayed jobs", got, n, n)
	}
}
