package proxy_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"

	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
)

// startLimitedBeanstalk serves a Beanstalk server with limits lim, a fake
// clock and metrics.
func startLimitedBeanstalk(t *testing.T, lim proxy.Limits) (*proxy.BeanstalkServer, *clock.Fake, *metrics.Metrics, string) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	addr, srv := bsServe(t, proxy.BeanstalkConfig{
		EngineConfig: engine.Config{Clock: clk},
		ConnLimits:   lim,
		Clock:        clk,
		Metrics:      m,
	})
	return srv, clk, m, addr
}

// waitClosed reads c until the server closes it; it fails the test if that
// takes more than a few seconds.
func waitClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// A server closing a socket with input it never read sends a reset,
	// not a FIN (a client cut off for not reading its replies has usually
	// sent more): that is a close by the server too.
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: not closed by the server: %v", what, err)
	}
}

// TestBeanstalkLimitsConnectionFlood: past max_connections a go-beanstalk
// client reads OUT_OF_MEMORY (ErrOOM) as its first reply; a slot freed
// admits the next client; per-IP caps apply the same way.
func TestBeanstalkLimitsConnectionFlood(t *testing.T) {
	bsBothPaths(t, testBeanstalkLimitsConnectionFlood)
}

func testBeanstalkLimitsConnectionFlood(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  proxy.Limits
	}{
		{"total", proxy.Limits{MaxConns: 3}},
		{"per_ip", proxy.Limits{MaxConnsPerIP: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, m, addr := startLimitedBeanstalk(t, tc.lim)
			var conns []*beanstalk.Conn
			for i := 0; i < 3; i++ {
				c, err := beanstalk.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.ListTubes(); err != nil {
					t.Fatalf("client %d within the limit: %v", i, err)
				}
				conns = append(conns, c)
			}
			for i := 0; i < 5; i++ {
				c, err := beanstalk.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.ListTubes()
				c.Close()
				if !errors.Is(err, beanstalk.ErrOOM) {
					t.Fatalf("client over the limit: got %v, want OUT_OF_MEMORY", err)
				}
			}
			conns[0].Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				c, err := beanstalk.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.ListTubes()
				c.Close()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a freed slot never admitted a client: %v", err)
				}
				time.Sleep(10 * time.Millisecond) // the server sees the close asynchronously
			}
			reason := metrics.ReasonMaxConnections
			if tc.lim.MaxConnsPerIP > 0 {
				reason = metrics.ReasonMaxPerIP
			}
			key := `jobgate_connections_rejected_total{protocol="beanstalk",reason="` + reason + `"}`
			if got := scrapeMetrics(t, m)[key]; got < 5 {
				t.Errorf("%s = %v, want at least 5", key, got)
			}
		})
	}
}

// TestBeanstalkLimitsIdleTimeout: with the fake clock past idle_timeout,
// a connection with nothing pending is closed; one blocked in reserve and
// one holding a reserved job stay, and the waiting one still gets its job.
func TestBeanstalkLimitsIdleTimeout(t *testing.T) { bsBothPaths(t, testBeanstalkLimitsIdleTimeout) }

func testBeanstalkLimitsIdleTimeout(t *testing.T) {
	_, clk, _, addr := startLimitedBeanstalk(t, proxy.Limits{IdleTimeout: 10 * time.Second})
	idle := bsDial(t, addr)
	idle.send(t, "list-tube-used\r\n")
	idle.expect(t, "USING default\r\n", "idle")

	holder := bsDial(t, addr)
	holder.send(t, "put 0 0 3600 1\r\na\r\n")
	holder.expect(t, "INSERTED 1\r\n", "put")
	holder.send(t, "reserve\r\n")
	holder.expect(t, "RESERVED 1 1\r\na\r\n", "reserve")

	waiter := bsDial(t, addr)
	waiter.send(t, "reserve\r\n")
	// The reserve must be waiting before time moves: poll the server's
	// view of it.
	producer := bsDial(t, addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		producer.send(t, "stats\r\n")
		body := producer.readReply(t)
		if strings.Contains(body, "current-waiting: 1\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reserve never started waiting")
		}
	}
	producer.nc.Close()

	for i := 0; i < 8; i++ { // 16s in sweeps of 2.5s
		clk.Advance(2 * time.Second)
	}
	waitClosed(t, idle.nc, "idle connection")

	c := bsDial(t, addr)
	c.send(t, "put 0 0 60 1\r\nb\r\n")
	c.expect(t, "INSERTED 2\r\n", "put")
	waiter.expect(t, "RESERVED 2 1\r\nb\r\n", "waiting reserve")
	holder.send(t, "delete 1\r\n")
	holder.expect(t, "DELETED\r\n", "holder")
}

// TestBeanstalkLimitsReadTimeout: a request started and never finished is
// cut off after read_timeout of the fake clock.
func TestBeanstalkLimitsReadTimeout(t *testing.T) { bsBothPaths(t, testBeanstalkLimitsReadTimeout) }

func testBeanstalkLimitsReadTimeout(t *testing.T) {
	_, clk, m, addr := startLimitedBeanstalk(t, proxy.Limits{ReadTimeout: 4 * time.Second})
	slow := bsDial(t, addr)
	slow.send(t, "list-tube-used\r\n")
	slow.expect(t, "USING default\r\n", "first")
	slow.send(t, "put 0 0 60 10\r\nabc")
	quiet := bsDial(t, addr)
	quiet.send(t, "list-tube-used\r\n")
	quiet.expect(t, "USING default\r\n", "quiet")
	key := `jobgate_connections_cut_total{protocol="beanstalk",reason="read_timeout"}`
	deadline := time.Now().Add(5 * time.Second)
	for scrapeMetrics(t, m)[key] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the partial request was never cut off")
		}
		clk.Advance(time.Second) // until the read loop has reported the partial request
	}
	waitClosed(t, slow.nc, "partial request")
	quiet.send(t, "list-tube-used\r\n")
	quiet.expect(t, "USING default\r\n", "a quiet connection with no read timeout pending")
}

// TestBeanstalkLimitsWriteTimeout: a client that sends commands and never
// reads the replies is cut off once the server's write has made no
// progress for write_timeout.
func TestBeanstalkLimitsWriteTimeout(t *testing.T) { bsBothPaths(t, testBeanstalkLimitsWriteTimeout) }

func testBeanstalkLimitsWriteTimeout(t *testing.T) {
	_, clk, m, addr := startLimitedBeanstalk(t, proxy.Limits{WriteTimeout: 4 * time.Second})
	// stats replies are ~1KB: the socket buffers fill fast.
	bsExpectWriteTimeoutCut(t, addr, "stats\r\n", clk, m)
}

// bsExpectWriteTimeoutCut sends cmd to addr over and over without reading
// a reply, advancing clk a second at a time, until m counts a write
// timeout cut; then the server must have closed the connection.
func bsExpectWriteTimeoutCut(t *testing.T, addr, cmd string, clk *clock.Fake, m *metrics.Metrics) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		cmds := []byte(strings.Repeat(cmd, 1000))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := nc.Write(cmds); err != nil {
				return
			}
		}
	}()
	key := `jobgate_connections_cut_total{protocol="beanstalk",reason="write_timeout"}`
	deadline := time.Now().Add(10 * time.Second)
	for scrapeMetrics(t, m)[key] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the client that does not read was never cut off")
		}
		clk.Advance(time.Second)
		time.Sleep(5 * time.Millisecond) // let the real socket fill between fake seconds
	}
	waitClosed(t, nc, "non-reading client")
}

// TestBeanstalkLimitsMaxReserved: past max_reserved_per_conn a reserve
// answers DEADLINE_SOON at once; once a job is deleted, reserve works.
func TestBeanstalkLimitsMaxReserved(t *testing.T) { bsBothPaths(t, testBeanstalkLimitsMaxReserved) }

func testBeanstalkLimitsMaxReserved(t *testing.T) {
	srv, _, _, addr := startLimitedBeanstalk(t, proxy.Limits{MaxReservedPerConn: 1})
	c := bsDial(t, addr)
	c.send(t, "put 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\n")
	c.expect(t, "INSERTED 1\r\n", "put")
	c.expect(t, "INSERTED 2\r\n", "put")
	c.send(t, "reserve\r\n")
	c.expect(t, "RESERVED 1 1\r\na\r\n", "first reserve")
	c.send(t, "reserve\r\n")
	c.expect(t, "DEADLINE_SOON\r\n", "reserve over the cap")
	c.send(t, "reserve-with-timeout 0\r\n")
	c.expect(t, "DEADLINE_SOON\r\n", "reserve-with-timeout over the cap")
	// A reload raising the cap applies to the open connection.
	srv.SetLimits(proxy.Limits{MaxReservedPerConn: 2})
	c.send(t, "reserve\r\n")
	c.expect(t, "RESERVED 2 1\r\nb\r\n", "reserve under the raised cap")
	c.send(t, "delete 1\r\n")
	c.expect(t, "DELETED\r\n", "delete")
}

// TestBeanstalkLimitsConcurrentFlood: 100 clients connect at once to a
// server capped at 10 connections; exactly 10 are served, every other one
// is refused (OUT_OF_MEMORY, or closed at once when too many refusals are
// in flight) and none hangs.
func TestBeanstalkLimitsConcurrentFlood(t *testing.T) {
	bsBothPaths(t, testBeanstalkLimitsConcurrentFlood)
}

func testBeanstalkLimitsConcurrentFlood(t *testing.T) {
	_, _, _, addr := startLimitedBeanstalk(t, proxy.Limits{MaxConns: 10})
	const clients = 100
	results := make(chan string, clients)
	conns := make(chan net.Conn, clients)
	for range clients {
		go func() {
			nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				results <- "dial: " + err.Error()
				return
			}
			conns <- nc
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write([]byte("list-tube-used\r\n")); err != nil {
				results <- "refused"
				return
			}
			buf := make([]byte, 64)
			n, err := io.ReadAtLeast(nc, buf, 1)
			switch reply := string(buf[:n]); {
			case reply == "USING default\r\n":
				results <- "served"
			case reply == "OUT_OF_MEMORY\r\n" || err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
				results <- "refused"
			default:
				results <- fmt.Sprintf("unexpected %q %v", reply, err)
			}
		}()
	}
	served := 0
	for range clients {
		switch r := <-results; r {
		case "served":
			served++
		case "refused":
		default:
			t.Error(r)
		}
	}
	close(conns)
	for nc := range conns {
		nc.Close()
	}
	if served != 10 {
		t.Errorf("%d clients served, want exactly 10", served)
	}
}
