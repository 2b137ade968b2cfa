package proxy

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/routing"
)

// linesWith returns the lines of a listing that contain sub.
func linesWith(lines []string, sub string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// TestGearmanGatewayAdminAfterReload checks that a reload changing a
// backend's settings at the same address (a new *routing.Backend) leaves
// a worker registered before it counted and listed once: its abilities
// and upstream sessions hold the backends of the old routing, the merge
// asks the new one's.
func TestGearmanGatewayAdminAfterReload(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	gw, srv := startAdminGateway(t, up)
	gatewayWorker(t, gw, up, "s.a")
	check := func(when string) {
		t.Helper()
		if got := linesWith(adminListing(t, gw, "status"), "s.a\t"); !slices.Equal(got, []string{"s.a\t0\t0\t1"}) {
			t.Errorf("status %s: %q, want s.a counted once", when, got)
		}
		if got := linesWith(adminListing(t, gw, "workers"), " s.a"); len(got) != 1 || !strings.HasSuffix(got[0], " - : s.a") {
			t.Errorf("workers %s: %q, want the worker listed once", when, got)
		}
	}
	check("before the reload")

	c := adminGatewayConfig(t, up)
	for i := range c.Backends {
		c.Backends[i].HealthInterval = 0 // as startGearmanGateway has them
	}
	c.Backends[0].IOTimeout = 4 * time.Second
	apply, err := srv.PrepareReload(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	if old, now := sessionBackend(srv, 1), routedBackend(srv, 1); old == now || old == nil || now == nil {
		t.Fatalf("the reload kept g1's *routing.Backend (%p, %p): nothing to check", old, now)
	}
	check("after the reload")
}

// sessionBackend returns the backend with id of an open upstream session
// of the gateway's own sessions, or nil.
func sessionBackend(srv *GearmanServer, id int) *routing.Backend {
	for _, s := range srv.gw.own.snapshot() {
		s.mu.Lock()
		for _, bs := range s.backends {
			if bs.b.ID == id {
				s.mu.Unlock()
				return bs.b
			}
		}
		s.mu.Unlock()
	}
	return nil
}

// routedBackend returns the routed backend with id of the routing in
// force, or nil.
func routedBackend(srv *GearmanServer, id int) *routing.Backend {
	for _, b := range srv.gw.rt().routed {
		if b.ID == id {
			return b
		}
	}
	return nil
}

// TestGearmanGatewayAdminWorkersTLS checks that workers connected over
// TLS are told apart in the merged "workers" listing: each is listed
// with its own socket's fd and the functions it registered on upstreams
// only.
func TestGearmanGatewayAdminWorkersTLS(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	g, err := NewGearmanGatewayFromConfig(adminGatewayConfigNoHealth(t, up), nil)
	if err != nil {
		t.Fatal(err)
	}
	g.AdminTimeout = 3 * time.Second
	srv, err := NewGearmanServer(GearmanConfig{Engine: gearman.Config{HandlePrefix: "H:jobgate"}, Gateway: g})
	if err != nil {
		t.Fatal(err)
	}
	ca := testutil.NewCA(t, "gateway CA")
	plain := testutil.Listen(t)
	secure := NewTLSListener(testutil.Listen(t), ca.MutualTLS(t), TLSListenerOptions{})
	go func() { _ = srv.Serve(plain) }()
	addr, _ := testutil.ServeOn(t, srv, secure)
	conf := ca.ClientTLS()
	conf.ServerName = "127.0.0.1"
	for range 2 {
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		w := &gwClient{t: t, nc: nc, r: codec.NewReader(nc, codec.Limits{})}
		w.send(codec.CanDo, "s.a")
		w.send(codec.CanDo, "local.b")
		w.quiet()
	}
	for _, u := range up {
		waitListing(t, u, "status", hasWorkers(2, "s.a"))
	}
	lines := adminListing(t, plain.Addr().String(), "workers")
	if got, want := workerLines(lines), []string{"- :", "- :local.b,s.a", "- :local.b,s.a"}; !slices.Equal(got, want) {
		t.Errorf("workers: %q\nas %q, want %q", lines, got, want)
	}
	for _, l := range linesWith(lines, "local.b") {
		if strings.HasPrefix(l, "-") {
			t.Errorf("a TLS connection is listed without its fd: %q", l)
		}
	}
}

// adminGatewayConfigNoHealth is adminGatewayConfig without health checks,
// as startGearmanGateway runs it.
func adminGatewayConfigNoHealth(t *testing.T, up []string) *config.Config {
	c := adminGatewayConfig(t, up)
	for i := range c.Backends {
		c.Backends[i].HealthInterval = 0
	}
	return c
}

// TestGearmanGatewayAdminWorkersIDWithColon checks that a worker whose
// client id holds " :" is listed once, with its functions, as gearmand
// lists it.
func TestGearmanGatewayAdminWorkersIDWithColon(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	gw, _ := startAdminGateway(t, up)
	w := dialGW(t, gw)
	w.send(codec.SetClientID, "a :b")
	w.send(codec.CanDo, "s.a")
	w.quiet()
	for _, u := range up {
		waitListing(t, u, "workers", func(lines []string) bool {
			return len(linesWith(lines, " a :b : s.a")) == 1
		})
	}
	lines := adminListing(t, gw, "workers")
	if got := linesWith(lines, "a :b"); len(got) != 1 || !strings.HasSuffix(got[0], " a :b : s.a") {
		t.Errorf("workers: %q, want the worker \"a :b\" listed once with s.a", lines)
	}
}

// TestGearmanGatewayAdminWorkersConcurrent checks that concurrent merged
// "workers" listings do not show each other's admin connections to the
// upstreams: every listing holds exactly the connections there are.
func TestGearmanGatewayAdminWorkersConcurrent(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	gw, _ := startAdminGateway(t, up)
	w := dialGW(t, gw)
	w.send(codec.CanDo, "s.a")
	w.quiet()
	d := dialGW(t, up[0])
	d.send(codec.SetClientID, "direct")
	d.send(codec.CanDo, "s.a")
	d.quiet()
	waitListing(t, up[0], "status", hasWorkers(2, "s.a"))
	waitListing(t, up[1], "status", hasWorkers(1, "s.a"))
	const n = 8
	want := []string{"- :s.a", "direct :s.a"}
	clients := make([]*gwClient, n)
	for i := range clients {
		clients[i] = dialGW(t, gw)
		clients[i].send(codec.SetClientID, fmt.Sprintf("c%d", i))
		clients[i].quiet() // the id is set before any listing below
		want = append(want, fmt.Sprintf("c%d :", i))
	}
	slices.Sort(want)
	for round := range 5 {
		var wg sync.WaitGroup
		got := make([][]string, n)
		errs := make([]error, n)
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = readListing(c.nc, c.r, "workers")
			}()
		}
		wg.Wait()
		for i := range clients {
			if errs[i] != nil {
				t.Fatalf("round %d, client %d: %v", round, i, errs[i])
			}
			if g := workerLines(got[i]); !slices.Equal(g, want) {
				t.Errorf("round %d, client %d: %q\nas %q, want %q", round, i, got[i], g, want)
			}
		}
	}
}

// readListing sends an admin line on nc and reads its listing, without
// the final "."; safe off the test's goroutine.
func readListing(nc net.Conn, r *codec.Reader, line string) ([]string, error) {
	if _, err := nc.Write([]byte(line + "\n")); err != nil {
		return nil, err
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out []string
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return nil, err
		}
		if f.Kind != codec.KindText {
			return nil, fmt.Errorf("%s: %v", line, f.String())
		}
		if string(f.Text) == "." {
			return out, nil
		}
		out = append(out, string(f.Text))
	}
}
