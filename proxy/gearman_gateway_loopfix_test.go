//go:build linux

package proxy

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/routing"
)

// Gateway tests of the event-loop path's review fixes
// (gearman_gateway_loop.go).

// tlsUnrouted is reloadConfig with backend g2 over TLS and routed to by
// nothing: only the handles a client holds, or forges, reach it.
func tlsUnrouted(t *testing.T, up []string) *config.Config {
	c := reloadConfig(t, up, "g1")
	c.Backends[1].TLS.Enabled = true
	return c
}

// loopRunning fails the test unless srv, serving addr, runs its event
// loop: a connection has been served, so Serve has started it.
func loopRunning(t *testing.T, addr string, srv *GearmanServer) {
	t.Helper()
	c := dialGW(t, addr)
	c.send(codec.EchoReq, "x")
	c.expect(codec.EchoRes)
	loopServed(t, srv)
}

// TestGearmanGatewayLoopTLSUnrouted: a TLS upstream the handle map knows
// puts the gateway on goroutines even when no route reaches it (a WORK_*
// or GET_STATUS naming it would open a session there), and a reload
// cannot add one to a gateway on the loop.
func TestGearmanGatewayLoopTLSUnrouted(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	_, gsrv := startGearmanGateway(t, tlsUnrouted(t, up), gearman.Config{})
	if !gsrv.cfg.Goroutines {
		t.Fatal("a gateway with an unrouted TLS upstream is on the event loop")
	}
	addr, srv := startGearmanGateway(t, reloadConfig(t, up, "g1"), gearman.Config{})
	loopRunning(t, addr, srv)
	if _, err := srv.PrepareReload(tlsUnrouted(t, up), nil); err == nil || !strings.Contains(err.Error(), "TLS upstream") {
		t.Fatalf("reload adding an unrouted TLS upstream: %v", err)
	}
}

// TestGearmanGatewayLoopRefusesTLSSession: should a loop connection ever
// meet a backend the loop cannot serve (here a routing put in force behind
// PrepareReload's back), it answers "unavailable" rather than open a
// session whose writes block: nothing dials the backend.
func TestGearmanGatewayLoopRefusesTLSSession(t *testing.T) {
	var dials atomic.Int32
	tlsUp := listenTest(t, func(net.Conn) { dials.Add(1) })
	up := []string{testutil.StartGearmand(t), tlsUp}
	addr, srv := startGearmanGateway(t, reloadConfig(t, up, "g1"), gearman.Config{})
	c := dialGW(t, addr)
	c.send(codec.EchoReq, "x")
	c.expect(codec.EchoRes)
	loopServed(t, srv)

	g, err := buildGearmanGateway(tlsUnrouted(t, up), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := newGwRouting(g)
	if err != nil {
		t.Fatal(err)
	}
	srv.gw.cur.Store(rt)

	c.write(append(pkt(codec.GetStatus, "@2:H:x:1"), pkt(codec.EchoReq, "after")...))
	if p := c.expect(codec.Error); !strings.Contains(string(p.Arg(1)), "unavailable") {
		t.Fatalf("GET_STATUS on the TLS backend: %v", p.String())
	}
	c.expect(codec.EchoRes)
	c.send(codec.WorkStatus, "@2:H:x:1", "1", "2")
	if p := c.expect(codec.Error); string(p.Arg(0)) != string(codec.CodeJobNotFound) {
		t.Fatalf("WORK_STATUS on the TLS backend: %v", p.String())
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("the TLS backend was dialled %d times from the loop", n)
	}
}

// TestGearmanGatewayLoopGrabDialsInTurn: a GRAB_JOB dials a backend only
// when its rotation reaches it, as on goroutines. The worker's second GRAB
// starts at the backend that has a job for it and is answered at once,
// without waiting for the blackholed backend's dial first.
func TestGearmanGatewayLoopGrabDialsInTurn(t *testing.T) {
	const dialTimeout = 1500 * time.Millisecond
	st := startGatewaySetup(t, []string{hangingListener(t), testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.DialTimeout = dialTimeout })
	fn := st.fnOwnedBy(t, "f", 2)
	c := dialGW(t, st.addr)
	for i := 0; i < 2; i++ {
		c.send(codec.SubmitJobBg, fn, "", "x")
		c.expect(codec.JobCreated)
	}
	w := dialGW(t, st.addr)
	w.send(codec.CanDo, fn)   // on both backends of the pool: g1's dial fails
	w.send(codec.GrabJob)     // starts at g1: dials it again, then g2
	w.expect(codec.JobAssign) // from g2
	loopServed(t, st.srv)
	start := time.Now()
	w.send(codec.GrabJob) // starts at g2
	w.expect(codec.JobAssign)
	if d := time.Since(start); d >= dialTimeout {
		t.Fatalf("a GRAB_JOB answered by the first backend it tries took %v (dial timeout %v)", d, dialTimeout)
	}
}

// TestGearmanGatewayLoopCanDoDialsInParallel: a CAN_DO on a pool of
// several unopened backends dials them at once, so two blackholed ones
// hold the connection one dial timeout, not two.
func TestGearmanGatewayLoopCanDoDialsInParallel(t *testing.T) {
	const dialTimeout = 1500 * time.Millisecond
	st := startGatewaySetup(t, []string{hangingListener(t), hangingListener(t), testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.DialTimeout = dialTimeout })
	w := dialGW(t, st.addr)
	w.quiet()
	start := time.Now()
	w.write(append(pkt(codec.CanDo, "f"), pkt(codec.EchoReq, "after")...))
	w.expect(codec.EchoRes)
	loopServed(t, st.srv)
	if d := time.Since(start); d >= 2*dialTimeout {
		t.Fatalf("CAN_DO on two blackholed backends held the connection %v (dial timeout %v)", d, dialTimeout)
	}
}

// TestGearmanGatewayLoopSendFailureCounts: a loop session that fails in
// Send (here: more output waits for an upstream that reads nothing than
// the write buffer limit allows) counts as a failure for the backend's
// breaker, as a session that fails on its own does.
func TestGearmanGatewayLoopSendFailureCounts(t *testing.T) {
	up := []string{listenTest(t, func(net.Conn) {}), testutil.StartGearmand(t)} // g1 never reads
	c := reloadConfig(t, up, "g1")
	c.Backends[0].IOTimeout = time.Minute // only Send fails it
	c.Backends[0].Breaker = config.Breaker{Failures: 1, OpenTimeout: time.Hour, HalfOpenRequests: 1}
	addr, srv := startGearmanGateway(t, c, gearman.Config{}, func(g *GearmanConfig) { g.MaxOutput = 1 << 20 })
	br := srv.gw.rt().cfg.Rules.Match([]byte("moved.a")).Backends()[0].Breaker
	cl := dialGW(t, addr)
	cl.quiet()
	loopServed(t, srv)
	// The first submit opens the session off the loop and queues more than
	// the socket buffers take; the second, read with the first's end and
	// handled before the loop could pause the client for the backlog
	// (throttle), finds more than the limit waiting: Send fails.
	big := strings.Repeat("d", 8<<20)
	cl.write(append(pkt(codec.SubmitJobBg, "moved.a", "", big), pkt(codec.SubmitJobBg, "moved.b", "", "x")...))
	for i := 0; i < 2; i++ {
		if p := cl.expect(codec.Error); !strings.Contains(string(p.Arg(1)), "backend g1") {
			t.Fatalf("submit %d: %v", i, p.String())
		}
	}
	for deadline := time.Now().Add(5 * time.Second); br.State() != routing.BreakerOpen; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("breaker %v after a session failed in Send (failures: 1)", br.State())
		}
	}
}

// TestGearmanGatewayLoopReloadMidRequest: a reload between a request's
// check for sessions to open and its handling does not leave it without
// its session ("backend session not open"): the request is routed by the
// configuration it was checked against, the next one by the new one.
func TestGearmanGatewayLoopReloadMidRequest(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	addr, srv := startGearmanGateway(t, reloadConfig(t, up, "g1"), gearman.Config{})
	c := dialGW(t, addr)
	c.send(codec.SubmitJobBg, "moved.a", "", "x")
	c.expect(codec.JobCreated)
	loopServed(t, srv)
	apply, err := srv.PrepareReload(reloadConfig(t, up, "g2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	hook := func() { once.Do(apply) }
	gwHandleHook.Store(&hook)
	t.Cleanup(func() { gwHandleHook.Store(nil) })
	c.send(codec.SubmitJobBg, "moved.b", "", "y")
	if p := c.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "@1:") {
		t.Fatalf("the request checked before the reload: %v", p.String())
	}
	c.send(codec.SubmitJobBg, "moved.c", "", "z")
	if p := c.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "@2:") {
		t.Fatalf("the request after the reload: %v", p.String())
	}
}

// TestGearmanGatewayReloadTLSBeforeServe: whether a reload may add a TLS
// upstream depends on whether an event loop runs, not on the option that
// allows one: before Serve it may, and Serve then serves the gateway with
// goroutines.
func TestGearmanGatewayReloadTLSBeforeServe(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	c := reloadConfig(t, up, "g1")
	for i := range c.Backends {
		c.Backends[i].HealthInterval = 0
	}
	g, err := NewGearmanGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewGearmanServer(GearmanConfig{Gateway: g})
	if err != nil {
		t.Fatal(err)
	}
	apply, err := srv.PrepareReload(tlsUnrouted(t, up), nil)
	if err != nil {
		t.Fatalf("reload adding a TLS upstream before Serve: %v", err)
	}
	apply()
	cl := dialGW(t, serveGearman(t, srv))
	cl.send(codec.EchoReq, "x")
	cl.expect(codec.EchoRes)
	if srv.loop.Load() != nil {
		t.Fatal("a gateway with a TLS upstream started an event loop")
	}
}

// offLoopRunning reports whether a goroutine handling a request off the
// event loop (handleOffLoop, grabOffLoop) exists.
func offLoopRunning() bool {
	buf := make([]byte, 1<<20)
	st := string(buf[:runtime.Stack(buf, true)])
	return strings.Contains(st, "handleOffLoop.func") || strings.Contains(st, "grabOffLoop.func")
}

// TestGearmanGatewayLoopShutdownWaitsForDials: Shutdown does not return
// while a request handled off the loop is still dialling; it cuts the
// dial short rather than wait for its timeout.
func TestGearmanGatewayLoopShutdownWaitsForDials(t *testing.T) {
	const dialTimeout = 20 * time.Second
	st := startGatewaySetup(t, []string{hangingListener(t), testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.DialTimeout = dialTimeout })
	c := dialGW(t, st.addr)
	c.quiet()
	loopServed(t, st.srv)
	c.send(codec.SubmitJobBg, st.fnOwnedBy(t, "f", 1), "", "x")
	for deadline := time.Now().Add(5 * time.Second); !offLoopRunning(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the submit was not handled off the loop")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout/2)
	defer cancel()
	if err := st.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// The goroutine has called wg.Done and is exiting; allow it a moment,
	// far less than the dial timeout it would otherwise wait out.
	for deadline := time.Now().Add(2 * time.Second); offLoopRunning(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Shutdown returned while a request was handled off the loop")
		}
	}
}

// hangShardConfig is a gateway whose default pool shards between g1, whose
// dial hangs (2s dial timeout), and g2, a gearmand.
func hangShardConfig(t *testing.T) *config.Config {
	c := config.Default()
	pool := config.Pool{Name: "shard", Strategy: config.StrategyShard}
	for i, a := range []string{hangingListener(t), testutil.StartGearmand(t)} {
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address = fmt.Sprintf("g%d", i+1), i+1, config.TypeGearman, a
		b.IOTimeout, b.DialTimeout, b.HealthInterval = 3*time.Second, 2*time.Second, 0
		c.Backends = append(c.Backends, b)
		pool.Backends = append(pool.Backends, b.Name)
	}
	c.Pools = append(c.Pools, pool)
	c.Routes.GearmanDefault = "shard"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGearmanGatewayLoopPausedNotIdle: a connection whose request waits
// off the loop for a dial is neither idle nor in the middle of reading a
// request, whatever its last read left: idle_timeout and read_timeout
// pass on the fake clock meanwhile, and the request is answered.
func TestGearmanGatewayLoopPausedNotIdle(t *testing.T) {
	c := hangShardConfig(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	addr, srv := startGearmanGateway(t, c, gearman.Config{Clock: clk}, func(g *GearmanConfig) {
		g.ConnLimits = Limits{IdleTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second}
	})
	st := &gwSetup{rules: srv.gw.rt().cfg.Rules}
	cl := dialGW(t, addr)
	cl.quiet()
	loopServed(t, srv)
	var conn *gearmanConn
	srv.mu.Lock()
	for x := range srv.conns {
		conn = x
	}
	srv.mu.Unlock()
	// Half a request, then the rest: the last read before the pause left
	// a partial request behind.
	submit := pkt(codec.SubmitJobBg, st.fnOwnedBy(t, "f", 1), "", "x")
	cl.write(submit[:8])
	for deadline := time.Now().Add(5 * time.Second); conn.watch.flags.Load()&watchPartial == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the loop did not read the partial request")
		}
	}
	cl.write(submit[8:])
	for deadline := time.Now().Add(5 * time.Second); !offLoopRunning(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the submit was not handled off the loop")
		}
	}
	for i := 0; i < 10; i++ { // 20s in sweeps: both timeouts pass
		clk.Advance(2 * time.Second)
	}
	if !offLoopRunning() {
		t.Fatal("the dial ended before the timeouts passed; the test proves nothing")
	}
	if p := cl.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "@2:") {
		t.Fatalf("the submit did not fail over: %v", p.String())
	}
}

// TestGearmanGatewayLoopPausedMetrics: a request handled off the loop is
// counted once handled, with its outcome, not when it is handed off.
func TestGearmanGatewayLoopPausedMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	addr, srv := startGearmanGateway(t, hangShardConfig(t), gearman.Config{}, func(g *GearmanConfig) { g.Metrics = m })
	st := &gwSetup{rules: srv.gw.rt().cfg.Rules}
	cl := dialGW(t, addr)
	cl.quiet()
	loopServed(t, srv)
	const key = `jobgate_commands_total{command="SUBMIT_JOB_BG",protocol="gearman",result="ok"}`
	cl.send(codec.SubmitJobBg, st.fnOwnedBy(t, "f", 1), "", "x")
	for deadline := time.Now().Add(5 * time.Second); !offLoopRunning(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the submit was not handled off the loop")
		}
	}
	if v := metricValue(t, m, key); v > 0 {
		t.Fatalf("%s = %v while the request waits for its dial", key, v)
	}
	cl.expect(codec.JobCreated)
	for deadline := time.Now().Add(5 * time.Second); metricValue(t, m, key) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v once handled", key, metricValue(t, m, key))
		}
	}
}
