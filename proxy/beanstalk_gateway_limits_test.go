package proxy_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
)

// bgwStartLimited serves a gateway over one beanstalkd with limits lim, a
// fake clock and metrics.
func bgwStartLimited(t *testing.T, lim proxy.Limits) (srv *proxy.BeanstalkServer, clk *clock.Fake, m *metrics.Metrics, gw, up string) {
	t.Helper()
	g, ups := bgwGateway(t, 1)
	clk = clock.NewFake(time.Unix(1_700_000_000, 0))
	m = metrics.New(metrics.Options{NoRuntimeCollectors: true})
	gw, srv = bsServe(t, proxy.BeanstalkConfig{Gateway: g, ConnLimits: lim, Clock: clk, Metrics: m})
	return srv, clk, m, gw, ups[1]
}

// upWaiting polls the upstream until n reserves wait on it.
func upWaiting(t *testing.T, up string, n int) {
	t.Helper()
	c := bsDial(t, up)
	defer c.nc.Close()
	want := "current-waiting: " + string(rune('0'+n)) + "\n"
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.send(t, "stats\r\n")
		if strings.Contains(c.readReply(t), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream never had %d reserves waiting", n)
		}
	}
}

// TestBeanstalkGatewayLimitsIdleTimeout: through the gateway, a quiet
// connection with nothing pending is closed; one holding a job reserved on
// the upstream and one whose reserve waits there stay, and the waiting one
// still gets its job.
func TestBeanstalkGatewayLimitsIdleTimeout(t *testing.T) {
	_, clk, _, addr, up := bgwStartLimited(t, proxy.Limits{IdleTimeout: 10 * time.Second})
	idle := bsDial(t, addr)
	defer idle.nc.Close()
	bsRoundTrip(t, idle, "list-tube-used\r\n", "USING default\r\n")

	holder := bsDial(t, addr)
	defer holder.nc.Close()
	bsRoundTrip(t, holder,
		"put 0 0 3600 1\r\na\r\n", "INSERTED "+gid(1)+"\r\n",
		"reserve\r\n", "RESERVED "+gid(1)+" 1\r\na\r\n",
	)
	waiter := bsDial(t, addr)
	defer waiter.nc.Close()
	waiter.send(t, "reserve\r\n")
	upWaiting(t, up, 1)

	for range 8 { // 16s in sweeps of 2.5s
		clk.Advance(2 * time.Second)
	}
	waitClosed(t, idle.nc, "idle connection")

	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c, "put 0 0 60 1\r\nb\r\n", "INSERTED "+gid(2)+"\r\n")
	waiter.expect(t, "RESERVED "+gid(2)+" 1\r\nb\r\n", "waiting reserve")
	bsRoundTrip(t, holder, "delete "+gid(1)+"\r\n", "DELETED\r\n")
}

// TestBeanstalkGatewayLimitsReadTimeout: a put begun and never finished
// through the gateway is cut off after read_timeout; a quiet connection
// is not.
func TestBeanstalkGatewayLimitsReadTimeout(t *testing.T) {
	_, clk, m, addr, _ := bgwStartLimited(t, proxy.Limits{ReadTimeout: 4 * time.Second})
	slow := bsDial(t, addr)
	defer slow.nc.Close()
	bsRoundTrip(t, slow, "list-tube-used\r\n", "USING default\r\n")
	slow.send(t, "put 0 0 60 10\r\nabc")
	quiet := bsDial(t, addr)
	defer quiet.nc.Close()
	bsRoundTrip(t, quiet, "list-tube-used\r\n", "USING default\r\n")
	key := `jobgate_connections_cut_total{protocol="beanstalk",reason="read_timeout"}`
	deadline := time.Now().Add(5 * time.Second)
	for scrapeMetrics(t, m)[key] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the partial request was never cut off")
		}
		clk.Advance(time.Second)
	}
	waitClosed(t, slow.nc, "partial request")
	bsRoundTrip(t, quiet, "list-tube-used\r\n", "USING default\r\n")
}

// TestBeanstalkGatewayLimitsWriteTimeout: a client that never reads its
// replies is cut off once the gateway's write made no progress for
// write_timeout.
func TestBeanstalkGatewayLimitsWriteTimeout(t *testing.T) {
	_, clk, m, addr, _ := bgwStartLimited(t, proxy.Limits{WriteTimeout: 4 * time.Second})
	bsExpectWriteTimeoutCut(t, addr, "list-tubes-watched\r\n", clk, m)
}

// TestBeanstalkGatewayLimitsMaxReserved: past max_reserved_per_conn a
// reserve or reserve-job through the gateway answers DEADLINE_SOON at
// once, without asking the upstream; a delete makes room again.
func TestBeanstalkGatewayLimitsMaxReserved(t *testing.T) {
	srv, _, _, addr, up := bgwStartLimited(t, proxy.Limits{MaxReservedPerConn: 1})
	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c,
		"put 0 0 60 1\r\na\r\n", "INSERTED "+gid(1)+"\r\n",
		"put 0 0 60 1\r\nb\r\n", "INSERTED "+gid(2)+"\r\n",
		"put 0 0 60 1\r\nc\r\n", "INSERTED "+gid(3)+"\r\n",
		"reserve\r\n", "RESERVED "+gid(1)+" 1\r\na\r\n",
		"reserve\r\n", "DEADLINE_SOON\r\n",
		"reserve-with-timeout 0\r\n", "DEADLINE_SOON\r\n",
		"reserve-job "+gid(3)+"\r\n", "DEADLINE_SOON\r\n",
	)
	u := bsDial(t, up)
	defer u.nc.Close()
	bsRoundTrip(t, u, "stats\r\n", "OK {n}\r\n---\n{...}current-jobs-reserved: 1\n{...}")
	srv.SetLimits(proxy.Limits{MaxReservedPerConn: 2})
	// Pipelined: the second reserve-job sees the first one's job.
	c.send(t, "reserve-job "+gid(2)+"\r\nreserve-job "+gid(3)+"\r\n")
	c.expect(t, "RESERVED "+gid(2)+" 1\r\nb\r\n", "reserve-job under the raised cap")
	c.expect(t, "DEADLINE_SOON\r\n", "pipelined reserve-job over the cap")
	bsRoundTrip(t, c,
		"delete "+gid(1)+"\r\n", "DELETED\r\n",
		"release "+gid(2)+" 0 0\r\n", "RELEASED\r\n",
		"reserve\r\n", "RESERVED "+gid(2)+" 1\r\nb\r\n",
		"reserve\r\n", "RESERVED "+gid(3)+" 1\r\nc\r\n",
		"reserve-with-timeout 0\r\n", "DEADLINE_SOON\r\n",
	)
}

// TestBeanstalkGatewayDrain: after Drain the gateway stops accepting and
// put answers DRAINING whatever backend the tube routes to (the upstream
// is not draining), while reserve and delete go on; Idle is false while a
// client holds a job reserved on the upstream.
func TestBeanstalkGatewayDrain(t *testing.T) {
	srv, _, _, addr, up := bgwStartLimited(t, proxy.Limits{})
	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c,
		"put 0 0 60 1\r\na\r\n", "INSERTED "+gid(1)+"\r\n",
		"put 0 0 60 1\r\nb\r\n", "INSERTED "+gid(2)+"\r\n",
		"reserve\r\n", "RESERVED "+gid(1)+" 1\r\na\r\n",
	)
	if srv.Idle() {
		t.Fatal("idle with a job reserved through the gateway")
	}
	srv.Drain()
	deadline := time.Now().Add(5 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		nc.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting after Drain")
		}
		time.Sleep(10 * time.Millisecond) // Serve notices the closed listener asynchronously
	}
	bsRoundTrip(t, c,
		"put 0 0 60 4\r\nlate\r\n", "DRAINING\r\n",
		"delete "+gid(1)+"\r\n", "DELETED\r\n",
		"reserve\r\n", "RESERVED "+gid(2)+" 1\r\nb\r\n",
	)
	if srv.Idle() {
		t.Fatal("idle with a job reserved through the gateway")
	}
	bsRoundTrip(t, c, "delete "+gid(2)+"\r\n", "DELETED\r\n")
	if !srv.Idle() {
		t.Fatal("not idle once every job is deleted")
	}
	u := bsDial(t, up)
	defer u.nc.Close()
	bsRoundTrip(t, u, "stats\r\n", "OK {n}\r\n---\n{...}total-jobs: 2\n{...}")
}

// TestBeanstalkGatewaySetDraining: beanstalkd's drain mode (SIGUSR1)
// makes puts through the gateway answer DRAINING while new connections
// are still served; turning it off lets puts through again.
func TestBeanstalkGatewaySetDraining(t *testing.T) {
	srv, _, _, addr, _ := bgwStartLimited(t, proxy.Limits{})
	srv.SetDraining(true)
	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c, "put 0 0 60 1\r\na\r\n", "DRAINING\r\n")
	if !srv.Draining() {
		t.Fatal("Draining() false in drain mode")
	}
	srv.SetDraining(false)
	bsRoundTrip(t, c, "put 0 0 60 1\r\na\r\n", "INSERTED "+gid(1)+"\r\n")
}
