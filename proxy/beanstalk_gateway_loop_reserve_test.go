package proxy_test

import (
	"net"
	"testing"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
)

// A reserve the gateway forwards holds the connection, as on beanstalkd:
// what the client sent after it runs once it is answered. These tests
// pipeline commands behind a waiting reserve, on the event loop and on
// goroutines.

// bgwStartLimitedPaths is bgwStartLimited on the path bsBothPaths names.
func bgwStartLimitedPaths(t *testing.T, lim proxy.Limits) (srv *proxy.BeanstalkServer, clk *clock.Fake, gw, up string) {
	t.Helper()
	g, ups := bgwGateway(t, 1)
	clk = clock.NewFake(time.Unix(1_700_000_000, 0))
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	gw, srv = bsServe(t, proxy.BeanstalkConfig{Gateway: g, ConnLimits: lim, Clock: clk, Metrics: m, Goroutines: bsGoroutines(t)})
	return srv, clk, gw, ups[1]
}

// TestBeanstalkGatewayPipelinedReserveCap: with max_reserved_per_conn 1,
// a reserve pipelined behind one that gets a job answers DEADLINE_SOON.
func TestBeanstalkGatewayPipelinedReserveCap(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		_, _, addr, _ := bgwStartLimitedPaths(t, proxy.Limits{MaxReservedPerConn: 1})
		c := bsDial(t, addr)
		defer c.nc.Close()
		bsRoundTrip(t, c,
			"put 0 0 60 1\r\na\r\n", "INSERTED "+gid(1)+"\r\n",
			"put 0 0 60 1\r\nb\r\n", "INSERTED "+gid(2)+"\r\n",
			"reserve-with-timeout 0\r\n", "RESERVED "+gid(1)+" 1\r\na\r\n", // opens the session
			"delete "+gid(1)+"\r\n", "DELETED\r\n",
		)
		c.send(t, "reserve\r\nreserve\r\n")
		c.expect(t, "RESERVED "+gid(2)+" 1\r\nb\r\n", "first reserve")
		c.expect(t, "DEADLINE_SOON\r\n", "the second reserve, over the cap")
	})
}

// TestBeanstalkGatewayHalfCloseBehindReserve: a command pipelined behind
// a reserve waiting upstream, then a half-close: the reserve answers
// TIMED_OUT, the command behind it runs after it (another reserve, or
// stats, which needs the gateway's goroutine code), and the connection
// closes.
func TestBeanstalkGatewayHalfCloseBehindReserve(t *testing.T) {
	for _, tc := range []struct{ name, cmd, reply string }{
		{"reserve", "reserve\r\n", "TIMED_OUT\r\n"},
		{"stats", "stats\r\n", "OK {n}\r\n---\n{...}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bsBothPaths(t, func(t *testing.T) {
				_, _, addr, up := bgwStartLimitedPaths(t, proxy.Limits{})
				c := bsDial(t, addr)
				defer c.nc.Close()
				bsRoundTrip(t, c, "reserve-with-timeout 0\r\n", "TIMED_OUT\r\n") // opens the session
				c.send(t, "reserve\r\n"+tc.cmd)
				upWaiting(t, up, 1)
				c.nc.(*net.TCPConn).CloseWrite()
				c.expect(t, "TIMED_OUT\r\n", "the reserve of a half-closed client")
				c.expect(t, tc.reply, "the command behind it")
				c.expectEOF(t, "after the replies")
			})
		})
	}
}

// TestBeanstalkGatewayIdleWhilePipelinedReserveWaits: a reserve waiting
// behind a pipelined reserve-with-timeout 0 keeps its connection from the
// idle timeout, which closes a quiet one meanwhile.
func TestBeanstalkGatewayIdleWhilePipelinedReserveWaits(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		_, clk, addr, up := bgwStartLimitedPaths(t, proxy.Limits{IdleTimeout: 10 * time.Second})
		w := bsDial(t, addr)
		defer w.nc.Close()
		bsRoundTrip(t, w, "reserve-with-timeout 0\r\n", "TIMED_OUT\r\n")
		idle := bsDial(t, addr)
		defer idle.nc.Close()
		bsRoundTrip(t, idle, "list-tube-used\r\n", "USING default\r\n")
		w.send(t, "reserve-with-timeout 0\r\nreserve\r\n")
		w.expect(t, "TIMED_OUT\r\n", "reserve-with-timeout 0")
		upWaiting(t, up, 1)
		for range 8 { // 16 s in sweeps of 2.5 s
			clk.Advance(2 * time.Second)
		}
		waitClosed(t, idle.nc, "the quiet connection") // the sweep has run
		p := bsDial(t, addr)
		defer p.nc.Close()
		bsRoundTrip(t, p, "put 0 0 60 1\r\nb\r\n", "INSERTED "+gid(1)+"\r\n")
		w.expect(t, "RESERVED "+gid(1)+" 1\r\nb\r\n", "the waiting reserve")
	})
}
