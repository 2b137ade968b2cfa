//go:build linux

package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
)

// bsSmallSendListener sets a small send buffer on every connection it
// accepts, so that replies the client has not read yet stay in the
// server's own buffer, whatever the kernel's autotuning would do.
type bsSmallSendListener struct{ net.Listener }

func (l bsSmallSendListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(8192)
	}
	return c, err
}

// bsServeSmallSend serves a Beanstalk server built from cfg whose sockets
// have a small send buffer.
func bsServeSmallSend(t *testing.T, cfg proxy.BeanstalkConfig) string {
	t.Helper()
	cfg.Goroutines = bsGoroutines(t)
	srv, err := proxy.NewBeanstalkServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := testutil.ServeOn(t, srv, bsSmallSendListener{testutil.Listen(t)})
	return addr
}

// bsDialSmallBuffer dials addr with a small receive buffer, set before the
// connect so the window the server sees is small too: replies back up in
// the server rather than in the client's kernel.
func bsDialSmallBuffer(t *testing.T, addr string) *bsConn {
	t.Helper()
	d := net.Dialer{Timeout: bsReplyTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &bsConn{nc: nc, br: bufio.NewReader(nc)}
}

// bsReadSlowly reads nc to its end a few KB at a time with a pause between
// reads, as a slow client does, and returns what it read; it fails the
// test after 30 s.
func bsReadSlowly(t *testing.T, nc net.Conn) string {
	t.Helper()
	var got strings.Builder
	buf := make([]byte, 8192)
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc.SetReadDeadline(deadline)
		n, err := nc.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			return got.String()
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", got.Len(), err)
		}
		time.Sleep(time.Millisecond) // slow: the server's output backs up
	}
}

// TestBeanstalkLoopQuitAfterBigReplies: quit behind pipelined commands
// whose replies back up (a client that reads slowly) closes the
// connection only once every reply is written.
func TestBeanstalkLoopQuitAfterBigReplies(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr := bsServeSmallSend(t, proxy.BeanstalkConfig{})
		body := strings.Repeat("x", 60000)
		p := bsDial(t, addr)
		defer p.nc.Close()
		bsRoundTrip(t, p, fmt.Sprintf("put 0 0 10 %d\r\n%s\r\n", len(body), body), "INSERTED 1\r\n")
		const n = 40 // 2.4 MB of replies
		c := bsDialSmallBuffer(t, addr)
		defer c.nc.Close()
		c.send(t, strings.Repeat("peek 1\r\n", n)+"quit\r\n")
		got := bsReadSlowly(t, c.nc)
		want := strings.Repeat(fmt.Sprintf("FOUND 1 %d\r\n%s\r\n", len(body), body), n)
		if got != want {
			t.Fatalf("got %d bytes (%d whole replies) then EOF, want %d", len(got), strings.Count(got, "FOUND"), len(want))
		}
	})
}

// TestBeanstalkLoopHangUpAfterBigReplies: a client that shuts its side
// behind pipelined commands whose replies back up gets them all, then EOF.
func TestBeanstalkLoopHangUpAfterBigReplies(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr := bsServeSmallSend(t, proxy.BeanstalkConfig{})
		body := strings.Repeat("x", 60000)
		p := bsDial(t, addr)
		defer p.nc.Close()
		bsRoundTrip(t, p, fmt.Sprintf("put 0 0 10 %d\r\n%s\r\n", len(body), body), "INSERTED 1\r\n")
		const n = 40
		c := bsDialSmallBuffer(t, addr)
		defer c.nc.Close()
		c.send(t, strings.Repeat("peek 1\r\n", n))
		c.nc.(*net.TCPConn).CloseWrite()
		got := bsReadSlowly(t, c.nc)
		want := strings.Repeat(fmt.Sprintf("FOUND 1 %d\r\n%s\r\n", len(body), body), n)
		if got != want {
			t.Fatalf("got %d bytes (%d whole replies) then EOF, want %d", len(got), strings.Count(got, "FOUND"), len(want))
		}
	})
}

// TestBeanstalkLoopWriteBufferLimit: on the loop, a client that stops
// reading while more than write_buffer_limit of replies waits is cut off
// and counted as a slow reader, as on Gearman; below the limit, one that
// reads gets everything.
func TestBeanstalkLoopWriteBufferLimit(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	addr := bsServeSmallSend(t, proxy.BeanstalkConfig{
		ConnLimits: proxy.Limits{WriteBufferLimit: 100 << 10},
		Metrics:    m,
	})
	body := strings.Repeat("x", 30000)
	p := bsDial(t, addr)
	defer p.nc.Close()
	bsRoundTrip(t, p, fmt.Sprintf("put 0 0 10 %d\r\n%s\r\n", len(body), body), "INSERTED 1\r\n")
	// A reply far under the limit: a reading client gets them all.
	for range 20 {
		bsRoundTrip(t, p, "peek 1\r\n", fmt.Sprintf("FOUND 1 %d\r\n%s\r\n", len(body), body))
	}
	c := bsDialSmallBuffer(t, addr)
	defer c.nc.Close()
	c.send(t, strings.Repeat("peek 1\r\n", 40)) // 1.2 MB of replies, never read
	key := `jobgate_connections_cut_total{protocol="beanstalk",reason="slow_reader"}`
	deadline := time.Now().Add(10 * time.Second)
	for scrapeMetrics(t, m)[key] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("slow reader cuts: %v, want 1", scrapeMetrics(t, m)[key])
		}
		time.Sleep(10 * time.Millisecond) // polling the metric
	}
	waitClosed(t, c.nc, "client over the write buffer limit")
	bsRoundTrip(t, p, "peek 1\r\n", fmt.Sprintf("FOUND 1 %d\r\n%s\r\n", len(body), body))
}

// TestBeanstalkLoopQuitWriteTimeout: a connection that sent quit behind
// replies its client never reads is closed by the write timeout.
func TestBeanstalkLoopQuitWriteTimeout(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
		addr := bsServeSmallSend(t, proxy.BeanstalkConfig{
			EngineConfig: engine.Config{Clock: clk},
			ConnLimits:   proxy.Limits{WriteTimeout: 4 * time.Second},
			Clock:        clk,
			Metrics:      m,
		})
		body := strings.Repeat("x", 60000)
		p := bsDial(t, addr)
		defer p.nc.Close()
		bsRoundTrip(t, p, fmt.Sprintf("put 0 0 10 %d\r\n%s\r\n", len(body), body), "INSERTED 1\r\n")
		c := bsDialSmallBuffer(t, addr)
		defer c.nc.Close()
		// 180 KB: under the loop's output mark, so quit is reached with
		// most of it unwritten.
		c.send(t, strings.Repeat("peek 1\r\n", 3)+"quit\r\n")
		key := `jobgate_connections_cut_total{protocol="beanstalk",reason="write_timeout"}`
		deadline := time.Now().Add(10 * time.Second)
		for scrapeMetrics(t, m)[key] == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the client that does not read was never cut off")
			}
			clk.Advance(time.Second)
			time.Sleep(5 * time.Millisecond) // let the loop take the quit between fake seconds
		}
		waitClosed(t, c.nc, "non-reading client after quit")
	})
}
