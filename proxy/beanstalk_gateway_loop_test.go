//go:build linux

package proxy_test

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/proxy"
)

// Gateway tests of the event-loop path: client connections and their
// plain-TCP upstream sessions on one epoll loop
// (beanstalk_gateway_loop.go, beanstalk_gateway_loop_linux.go).

func init() {
	// The transcripts also run through a gateway on goroutines, the path
	// kept for TLS upstreams and other platforms.
	bsGatewayStarts = append(bsGatewayStarts, bsStartGatewayRealGoroutines)
}

// bsStartGatewayRealGoroutines is bsStartGatewayReal with the gateway's
// connections on goroutines.
func bsStartGatewayRealGoroutines(t testing.TB, maxJobSize int) bsServer {
	t.Helper()
	var flags []string
	if maxJobSize != 0 {
		flags = append(flags, "-z", strconv.Itoa(maxJobSize))
	}
	addr := testutil.StartBeanstalkd(t, flags...)
	gwAddr, srv := bsServe(t, proxy.BeanstalkConfig{
		EngineConfig: engine.Config{MaxJobSize: maxJobSize},
		Gateway:      bsSingleGateway(t, addr, 0),
		Goroutines:   true,
	})
	t.Cleanup(func() {
		if _, _, _, ok := proxy.GatewayLoopCounts(srv); ok {
			t.Error("a gateway told to use goroutines started its event loop")
		}
	})
	return bsServer{name: "gateway-beanstalkd-goroutines", addr: gwAddr,
		drain: func(t *testing.T) { bsSignalReal(t, addr) }}
}

// loopCounts returns the gateway loop's counts, failing when it has none.
func loopCounts(t *testing.T, srv *proxy.BeanstalkServer) (on, off, stalls int64) {
	t.Helper()
	on, off, stalls, ok := proxy.GatewayLoopCounts(srv)
	if !ok {
		t.Fatal("the gateway has no event loop")
	}
	return on, off, stalls
}

// TestBeanstalkGatewayLoopServes drives a gateway in front of one
// beanstalkd with go-beanstalk through the simple commands: after the
// first command to the backend, which dials off the loop, every one is
// served on the loop, the reserve too (the watch list lives on one
// upstream), with the replies in order.
func TestBeanstalkGatewayLoopServes(t *testing.T) {
	t.Parallel()
	cl := bgwStart(t, 1, false)
	gc := bgwDial(t, cl.addr)
	tube := gobeanstalk.NewTube(gc, "jobs")
	ts := gobeanstalk.NewTubeSet(gc, "jobs")
	const n = 50
	for i := range n {
		body := []byte("job " + strconv.Itoa(i))
		id, err := tube.Put(body, 10, 0, time.Minute)
		must(t, err)
		rid, got, err := ts.Reserve(5 * time.Second)
		must(t, err)
		if rid != id || !bytes.Equal(got, body) {
			t.Fatalf("reserved %d %q, want %d %q", rid, got, id, body)
		}
		st, err := gc.StatsJob(id)
		must(t, err)
		if st["state"] != "reserved" || st["tube"] != "jobs" {
			t.Fatalf("stats-job: %v", st)
		}
		must(t, gc.Touch(id))
		if i%2 == 0 {
			must(t, gc.Release(id, 5, 0))
			got, err := gc.Peek(id)
			must(t, err)
			if !bytes.Equal(got, body) {
				t.Fatalf("peek %q, want %q", got, body)
			}
			rid, _, err = ts.Reserve(5 * time.Second)
			must(t, err)
			must(t, gc.Bury(rid, 1))
			must(t, gc.KickJob(rid))
			rid, _, err = ts.Reserve(5 * time.Second)
			must(t, err)
		}
		must(t, gc.Delete(rid))
	}
	on, off, _ := loopCounts(t, cl.srv)
	t.Logf("%d commands on the loop, %d off it", on, off)
	if off > 4 || on < 5*n {
		t.Fatalf("%d commands on the loop and %d off it; want nearly all on it", on, off)
	}
}

// TestBeanstalkGatewayLoopUpstreamDies kills the only upstream of a
// client's watch list while its reserve waits on the loop: the reserve
// answers INTERNAL_ERROR and the connection goes on with the other
// upstream.
func TestBeanstalkGatewayLoopUpstreamDies(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t)
	conn := bsDial(t, fc.addr)
	defer conn.nc.Close()
	conn.send(t, "watch solo\r\nignore default\r\n")
	conn.expect(t, "WATCHING 2\r\nWATCHING 1\r\n", "watch")
	conn.send(t, "reserve-with-timeout 0\r\n")
	conn.expect(t, "TIMED_OUT\r\n", "nothing ready")
	on0, _, _ := loopCounts(t, fc.srv)
	conn.send(t, "reserve\r\n")
	direct := bgwDial(t, fc.ups[1])
	for deadline := time.Now().Add(bsReplyTimeout); ; {
		st, err := direct.Stats()
		must(t, err)
		if st["current-waiting"] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reserve never reached the upstream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if on, _, _ := loopCounts(t, fc.srv); on <= on0 {
		t.Fatal("the reserve was not served on the loop")
	}
	direct.Close()
	kill(t, fc.procs[1])
	conn.expect(t, "INTERNAL_ERROR\r\n", "reserve on the killed upstream")
	tube := ""
	for i := 0; tube == ""; i++ {
		if name := "other-" + strconv.Itoa(i); fc.owner(name) == 2 {
			tube = name
		}
	}
	conn.send(t, "use "+tube+"\r\nput 1 0 10 1\r\nx\r\nlist-tube-used\r\n")
	conn.expect(t, "USING "+tube+"\r\nINSERTED {n}\r\nUSING "+tube+"\r\n", "the other upstream")
}

// TestBeanstalkGatewayLoopBackpressure: a client that pipelines commands
// with large replies and does not read them stops being read (its output
// waits, bounded) while other clients are served; once it reads, every
// reply comes, in order.
func TestBeanstalkGatewayLoopBackpressure(t *testing.T) {
	t.Parallel()
	cl := bgwStart(t, 1, false)
	gc := bgwDial(t, cl.addr)
	body := bytes.Repeat([]byte("b"), 60000)
	id, err := gobeanstalk.NewTube(gc, "big").Put(body, 1, 0, time.Minute)
	must(t, err)
	slow := bsDial(t, cl.addr)
	defer slow.nc.Close()
	const n = 300 // 18 MB of replies
	cmd := "peek " + strconv.FormatUint(id, 10) + "\r\n"
	sent := make(chan error, 1)
	go func() {
		_, err := slow.nc.Write([]byte(strings.Repeat(cmd, n)))
		sent <- err
	}()
	for deadline := time.Now().Add(bsReplyTimeout); ; {
		if _, _, stalls := loopCounts(t, cl.srv); stalls > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop never stopped reading the client that does not read")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Others are served meanwhile.
	other := bgwDial(t, cl.addr)
	oid, err := gobeanstalk.NewTube(other, "small").Put([]byte("x"), 1, 0, time.Minute)
	must(t, err)
	must(t, other.Delete(oid))
	want := fmt.Sprintf("FOUND %d %d\r\n%s\r\n", id, len(body), body)
	for i := range n {
		if got := slow.readReply(t); got != want {
			t.Fatalf("reply %d: %.40q, want %.40q", i, got, want)
		}
	}
	must(t, <-sent)
}

// TestBeanstalkGatewayLoopTLSFallback: a gateway with a TLS upstream
// serves its connections with goroutines (the loop cannot write TLS
// without blocking), and they work.
func TestBeanstalkGatewayLoopTLSFallback(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t, "upstream CA")
	up := startTLSBeanstalkUpstream(t, ca)
	dir := t.TempDir()
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "tls-up", 1, config.TypeBeanstalk, up, 0
	certPEM, keyPEM := ca.Issue(t, testutil.Leaf{CN: "gateway", Client: true})
	b.TLS = config.ClientTLS{Enabled: true, CAFile: testutil.WriteFile(t, dir, "ca.pem", ca.PEM),
		CertFile: testutil.WriteFile(t, dir, "gw.pem", certPEM), KeyFile: testutil.WriteFile(t, dir, "gw.key", keyPEM)}
	c.Backends = append(c.Backends, b)
	c.Routes.BeanstalkDefault = "tls-up"
	must(t, c.Validate())
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	must(t, err)
	addr, srv := bsServe(t, proxy.BeanstalkConfig{Gateway: g})
	gc := bgwDial(t, addr)
	id, err := gobeanstalk.NewTube(gc, "secure").Put([]byte("x"), 1, 0, time.Minute)
	must(t, err)
	rid, _, err := gobeanstalk.NewTubeSet(gc, "secure").Reserve(5 * time.Second)
	must(t, err)
	if rid != id {
		t.Fatalf("reserved %d, want %d", rid, id)
	}
	must(t, gc.Delete(id))
	if _, _, _, ok := proxy.GatewayLoopCounts(srv); ok {
		t.Fatal("a gateway with a TLS upstream started its event loop")
	}
}

// TestBeanstalkGatewayLoopUpstreamBacklog: an upstream that stops reading
// makes the loop stop reading the client that feeds it (as a goroutine
// connection would block on its write), without failing the session or
// holding up other clients.
func TestBeanstalkGatewayLoopUpstreamBacklog(t *testing.T) {
	t.Parallel()
	deaf := listenDeaf(t)
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "deaf", 1, config.TypeBeanstalk, deaf, 0
	b.IOTimeout = time.Minute
	c.Backends = append(c.Backends, b)
	c.Routes.Beanstalk = []config.Route{{Exact: "deaf", Backend: "deaf"}}
	must(t, c.Validate())
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	must(t, err)
	addr, srv := bsServeGateway(t, g, 0)
	feeder := bsDial(t, addr)
	defer feeder.nc.Close()
	feeder.send(t, "use deaf\r\n")
	body := strings.Repeat("d", 60000)
	put := "put 1 0 60 60000\r\n" + body + "\r\n"
	go feeder.nc.Write([]byte(strings.Repeat(put, 400))) // 24 MB; ends when the test closes it
	for deadline := time.Now().Add(bsReplyTimeout); ; {
		if _, _, stalls := loopCounts(t, srv); stalls > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop never stopped reading the client of an upstream that does not read")
		}
		time.Sleep(5 * time.Millisecond)
	}
	other := bsDial(t, addr)
	defer other.nc.Close()
	bsRoundTrip(t, other,
		"use elsewhere\r\n", "USING elsewhere\r\n",
		"put 0 0 60 1\r\nx\r\n", "INSERTED {n}\r\n",
	)
}

// listenDeaf returns the address of a server that accepts connections and
// never reads from them.
func listenDeaf(t *testing.T) string {
	t.Helper()
	l := testutil.Listen(t)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
		}
	}()
	return l.Addr().String()
}

// TestBeanstalkGatewayLoopReloadTLSRefused: a reload cannot give a
// gateway whose connections the loop serves a TLS upstream (one no route
// reaches is left out of the routing, so does not count); the gateway
// goes on as it was.
func TestBeanstalkGatewayLoopReloadTLSRefused(t *testing.T) {
	t.Parallel()
	up := testutil.StartBeanstalkd(t)
	ca := testutil.NewCA(t, "upstream CA")
	dir := t.TempDir()
	conf := func(tlsToo bool) *config.Config {
		c := config.Default()
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "plain", 1, config.TypeBeanstalk, up, 0
		c.Backends = append(c.Backends, b)
		if tlsToo {
			s := config.DefaultBackend()
			s.Name, s.ID, s.Type, s.Address, s.HealthInterval = "secure", 2, config.TypeBeanstalk, "127.0.0.1:1", 0
			s.TLS = config.ClientTLS{Enabled: true, CAFile: testutil.WriteFile(t, dir, "ca.pem", ca.PEM)}
			c.Backends = append(c.Backends, s)
			c.Routes.Beanstalk = []config.Route{{Exact: "secure", Backend: "secure"}}
		}
		c.Routes.BeanstalkDefault = "plain"
		must(t, c.Validate())
		return c
	}
	g, err := proxy.NewBeanstalkGatewayFromConfig(conf(false), nil)
	must(t, err)
	addr, srv := bsServeGateway(t, g, 0)
	conn := bsDial(t, addr)
	defer conn.nc.Close()
	bsRoundTrip(t, conn, "put 0 0 60 1\r\nx\r\n", "INSERTED {n}\r\n")
	loopCounts(t, srv)
	if _, err := srv.PrepareReload(conf(true), nil); err == nil || !strings.Contains(err.Error(), "TLS upstream") {
		t.Fatalf("reload adding a TLS upstream: %v", err)
	}
	if _, err := srv.PrepareReload(conf(false), nil); err != nil {
		t.Fatalf("reload without one: %v", err)
	}
	bsRoundTrip(t, conn, "list-tube-used\r\n", "USING default\r\n")
}
