package proxy

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/routing/upstream"
)

// gwClient is a raw Gearman connection for the gateway tests.
type gwClient struct {
	t  testing.TB
	nc net.Conn
	r  *codec.Reader
}

func dialGW(t testing.TB, addr string) *gwClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &gwClient{t: t, nc: nc, r: codec.NewReader(nc, codec.Limits{})}
}

func pkt(typ codec.Type, args ...string) []byte {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	return codec.AppendPacket(nil, codec.Req, typ, b...)
}

func (c *gwClient) send(typ codec.Type, args ...string) {
	c.t.Helper()
	c.write(pkt(typ, args...))
}

func (c *gwClient) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// next reads the next packet (a copy), failing the test after 5s.
func (c *gwClient) next() codec.Packet {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := c.r.ReadFrame()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if f.Kind != codec.KindPacket {
		c.t.Fatalf("want a packet, got %v", f.String())
	}
	return f.Packet.Clone()
}

func (c *gwClient) expect(typ codec.Type) codec.Packet {
	c.t.Helper()
	p := c.next()
	if p.Type != typ {
		c.t.Fatalf("want %v, got %v", typ, p.String())
	}
	return p
}

// quiet checks that nothing is pending with an ECHO round trip.
func (c *gwClient) quiet() {
	c.t.Helper()
	c.send(codec.EchoReq, "sync")
	if p := c.next(); p.Type != codec.EchoRes {
		c.t.Fatalf("expected nothing, got %v", p.String())
	}
}

// gwSetup is a gateway in front of the local engine and two gearmand.
type gwSetup struct {
	addr   string
	srv    *GearmanServer
	up     []string // the upstreams' addresses, by backend id-1
	rules  *routing.Rules
	byID   map[int]*routing.Backend
	admins []*upstream.Gearman
}

// startGatewaySetup routes functions starting "local." to the local
// engine and every other function to a shard pool of the upstreams at
// addrs (ids 1, 2, ...); mods change each upstream's settings.
func startGatewaySetup(t testing.TB, addrs []string, breaker config.Breaker, mods ...func(*config.Backend)) *gwSetup {
	t.Helper()
	c := config.Default()
	pool := config.Pool{Name: "shard", Strategy: config.StrategyShard}
	for i, a := range addrs {
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address = fmt.Sprintf("g%d", i+1), i+1, config.TypeGearman, a
		b.IOTimeout, b.DialTimeout = 3*time.Second, time.Second
		b.Breaker = breaker
		for _, m := range mods {
			m(&b)
		}
		c.Backends = append(c.Backends, b)
		pool.Backends = append(pool.Backends, b.Name)
	}
	c.Pools = append(c.Pools, pool)
	c.Routes.Gearman = []config.Route{{Prefix: "local.", Backend: config.LocalName}}
	c.Routes.GearmanDefault = "shard"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	addr, srv := startGearmanGateway(t, c, gearman.Config{HandlePrefix: "H:jobgate"})
	st := &gwSetup{addr: addr, srv: srv, up: addrs, rules: srv.gw.rt().cfg.Rules, byID: map[int]*routing.Backend{}}
	for _, b := range srv.gw.rt().cfg.Rules.Default().Backends() {
		st.byID[b.ID] = b
	}
	for _, a := range addrs {
		g, err := upstream.NewGearman(upstream.GearmanConfig{Config: upstream.Config{Addr: a, IOTimeout: 3 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		st.admins = append(st.admins, g)
	}
	return st
}

// fnOwnedBy returns a function name that the shard pool gives backend id.
func (st *gwSetup) fnOwnedBy(t testing.TB, prefix string, id int) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		fn := prefix + strconv.Itoa(i)
		if st.rules.Match([]byte(fn)).Owner([]byte(fn)).ID == id {
			return fn
		}
	}
	t.Fatalf("no function for backend %d", id)
	return ""
}

// upstreamStatus returns the "status" line of fn on upstream i (by
// backend id), "" when it has none.
func (st *gwSetup) upstreamStatus(t testing.TB, id int, fn string) string {
	t.Helper()
	lines, err := st.admins[id-1].Admin(context.Background(), "status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, fn+"\t") {
			return l
		}
	}
	return ""
}

func TestGearmanGatewayRoutesAndDrains(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}, config.Breaker{})
	fns := map[int]string{0: "local.f", 1: st.fnOwnedBy(t, "f", 1), 2: st.fnOwnedBy(t, "f", 2)}
	c := dialGW(t, st.addr)
	handles := map[string]int{}
	for id := 0; id <= 2; id++ {
		for j := 0; j < 2; j++ {
			c.send(codec.SubmitJobBg, fns[id], "", fmt.Sprintf("job-%d-%d", id, j))
			h := string(c.expect(codec.JobCreated).Args[0])
			want := fmt.Sprintf("@%d:H:", id)
			if id == 0 {
				want = "H:jobgate:"
			}
			if !strings.HasPrefix(h, want) {
				t.Fatalf("function %s: handle %q, want prefix %q", fns[id], h, want)
			}
			handles[h] = id
		}
	}
	// The jobs landed where the hash says, and nowhere else.
	for id := 1; id <= 2; id++ {
		if got, want := st.upstreamStatus(t, id, fns[id]), fns[id]+"\t2\t0\t0"; got != want {
			t.Errorf("upstream %d: status %q, want %q", id, got, want)
		}
		if got := st.upstreamStatus(t, 3-id, fns[id]); got != "" {
			t.Errorf("upstream %d has %s: %q", 3-id, fns[id], got)
		}
	}
	// GET_STATUS through the gateway round-trips every handle.
	for h := range handles {
		c.send(codec.GetStatus, h)
		if p := c.expect(codec.StatusRes); string(p.Args[0]) != h || string(p.Args[1]) != "1" {
			t.Fatalf("GET_STATUS %s: %v", h, p.String())
		}
	}
	// Aggregated status: every function once, with its count.
	a := dialGW(t, st.addr)
	a.write([]byte("status\n"))
	_ = a.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []string
	for {
		f, err := a.r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if string(f.Text) == "." {
			break
		}
		got = append(got, string(f.Text))
	}
	for id := 0; id <= 2; id++ {
		want := fns[id] + "\t2\t0\t0"
		found := false
		for _, l := range got {
			found = found || l == want
		}
		if !found {
			t.Errorf("status %q lacks %q", got, want)
		}
	}
	// A worker on the gateway gets every job exactly once, from every
	// backend, also jobs put on a backend that does not own the function
	// (as after a producer failover).
	direct := dialGW(t, st.up[1])
	direct.send(codec.SubmitJobBg, fns[1], "", "stray")
	handles["@2:"+string(direct.expect(codec.JobCreated).Args[0])] = 2
	w := dialGW(t, st.addr)
	for _, fn := range fns {
		w.send(codec.CanDo, fn)
	}
	seen := map[string]bool{}
	for len(seen) < len(handles) {
		w.send(codec.GrabJob)
		p := w.next()
		if p.Type == codec.NoJob {
			t.Fatalf("NO_JOB after %d of %d jobs", len(seen), len(handles))
		}
		if p.Type != codec.JobAssign {
			t.Fatalf("got %v", p.String())
		}
		h := string(p.Args[0])
		if _, ok := handles[h]; !ok || seen[h] {
			t.Fatalf("unexpected or repeated job %q", h)
		}
		seen[h] = true
		w.send(codec.WorkComplete, h, "done")
	}
	w.send(codec.GrabJob)
	w.expect(codec.NoJob)
	for h := range handles {
		c.send(codec.GetStatus, h)
		if p := c.expect(codec.StatusRes); string(p.Args[1]) != "0" {
			t.Fatalf("GET_STATUS %s after completion: %v", h, p.String())
		}
	}
}

func TestGearmanGatewayWakesSleepingWorker(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}, config.Breaker{})
	fn := st.fnOwnedBy(t, "w", 2)
	w := dialGW(t, st.addr)
	w.send(codec.CanDo, fn)
	w.send(codec.CanDo, "local.x")
	for round, via := range []string{st.addr, st.up[0], st.up[1], st.addr} {
		w.send(codec.PreSleep)
		w.quiet()
		c := dialGW(t, via)
		target := fn
		if round == 3 {
			target = "local.x"
		}
		c.send(codec.SubmitJobBg, target, "", "x")
		c.expect(codec.JobCreated)
		w.expect(codec.Noop)
		w.send(codec.GrabJob)
		p := w.expect(codec.JobAssign)
		w.send(codec.WorkComplete, string(p.Args[0]), "")
		w.send(codec.GrabJob)
		w.expect(codec.NoJob)
		w.quiet() // one NOOP per sleep, however many backends saw the job
	}
}

func TestGearmanGatewayCLI(t *testing.T) {
	gm := testutil.RequireBinary(t, "gearman")
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}, config.Breaker{})
	_, port, _ := net.SplitHostPort(st.addr)
	fns := []string{"local.rev", st.fnOwnedBy(t, "rev", 1), st.fnOwnedBy(t, "rev", 2)}
	args := []string{"-w", "-h", "127.0.0.1", "-p", port, "-c", "3"}
	for _, fn := range fns {
		args = append(args, "-f", fn)
	}
	worker := exec.Command(gm, append(args, "--", "tr", "a-z", "A-Z")...)
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() { done <- worker.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = worker.Process.Kill()
		<-exited
	})
	for _, fn := range fns {
		out, err := exec.Command(gm, "-h", "127.0.0.1", "-p", port, "-t", "10000", "-f", fn, "hello "+fn).CombinedOutput()
		if err != nil || string(out) != strings.ToUpper("hello "+fn) {
			t.Fatalf("client %s: %q %v", fn, out, err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not get its 3 jobs")
	}
	// Background jobs land on the owner, as gearadmin sees it.
	fn := st.fnOwnedBy(t, "bg", 2)
	if out, err := exec.Command(gm, "-h", "127.0.0.1", "-p", port, "-b", "-f", fn, "x").CombinedOutput(); err != nil {
		t.Fatalf("background client: %q %v", out, err)
	}
	_, upPort, _ := net.SplitHostPort(st.up[1])
	out, err := exec.Command(testutil.RequireBinary(t, "gearadmin"), "-h", "127.0.0.1", "-p", upPort, "--status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), fn+"\t1\t0\t0") {
		t.Fatalf("gearadmin --status on the owner: %q %v", out, err)
	}
}

func TestNewGearmanGatewayFromConfig(t *testing.T) {
	// No upstream: the plain server, whose connections use the engine
	// directly.
	g, err := NewGearmanGatewayFromConfig(config.Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Handles.Passthrough() {
		t.Fatal("a default configuration rewrites handles")
	}
	srv, err := NewGearmanServer(GearmanConfig{Gateway: g})
	if err != nil {
		t.Fatal(err)
	}
	if srv.gw != nil {
		t.Fatal("a gateway without upstreams is not the plain server")
	}
	srv.Engine().Stop()

	// Routes, pools and backends as configured.
	c := config.Default()
	for i, a := range []string{"127.0.0.1:1", "127.0.0.1:2"} {
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address = fmt.Sprintf("g%d", i+1), i+1, config.TypeGearman, a
		c.Backends = append(c.Backends, b)
	}
	c.Pools = []config.Pool{{Name: "fo", Strategy: config.StrategyFailover, Backends: []string{"g2", "g1"}}}
	c.Routes.Gearman = []config.Route{{Glob: "img.*", Pool: "fo"}, {Exact: "one", Backend: "g1"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err = NewGearmanGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	for fn, want := range map[string]string{"img.resize": "g2", "one": "g1", "other": "local"} {
		if got := g.Rules.Match([]byte(fn)).Owner([]byte(fn)).Name; got != want {
			t.Errorf("%s goes to %s, want %s", fn, got, want)
		}
	}
	b, h := g.Handles.Decode([]byte("@2:H:x:1"))
	if b == nil || b.Name != "g2" || string(h) != "H:x:1" || b.Breaker == nil || b.Health == nil {
		t.Fatalf("handle decodes to %+v %q", b, h)
	}
}

func TestGearmanGatewayUnknownHandles(t *testing.T) {
	st := startGatewaySetup(t, []string{fakeGearmand(t, 0, 0)}, config.Breaker{})
	c := dialGW(t, st.addr)
	c.send(codec.WorkComplete, "@9:H:x:1", "data")
	if p := c.expect(codec.Error); string(p.Args[0]) != string(codec.CodeJobNotFound) {
		t.Fatalf("got %v", p.String())
	}
	c.send(codec.GetStatus, "@01:H:x:1")
	if p := c.expect(codec.StatusRes); string(p.Args[0]) != "@01:H:x:1" || string(p.Args[1]) != "0" {
		t.Fatalf("got %v", p.String())
	}
}

func TestGearmanGatewayStatusUnique(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}, config.Breaker{})
	c := dialGW(t, st.addr)
	for id, fn := range []string{"local.u", st.fnOwnedBy(t, "u", 1), st.fnOwnedBy(t, "u", 2)} {
		u := "uniq-" + strconv.Itoa(id)
		c.send(codec.SubmitJobBg, fn, u, "x")
		c.expect(codec.JobCreated)
		c.send(codec.GetStatusUnique, u)
		if p := c.expect(codec.StatusResUnique); string(p.Args[0]) != u || string(p.Args[1]) != "1" {
			t.Fatalf("%s: %v", fn, p.String())
		}
	}
	c.send(codec.GetStatusUnique, "nowhere")
	if p := c.expect(codec.StatusResUnique); string(p.Args[1]) != "0" {
		t.Fatalf("unknown unique: %v", p.String())
	}
}

// TestGearmanGatewayAbilities checks, on the upstreams themselves, that a
// worker's functions are registered once on every backend of their pool,
// with its client id, and unregistered by CANT_DO and RESET_ABILITIES.
func TestGearmanGatewayAbilities(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}, config.Breaker{})
	// expect polls upstream id's "workers" listing until the worker's
	// line ends in one of want: ECHO through the gateway proves the
	// requests were written upstream, not that gearmand has read them.
	expect := func(id int, want ...string) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			lines, err := st.admins[id-1].Admin(context.Background(), "workers")
			if err != nil {
				t.Fatal(err)
			}
			got = ""
			for _, l := range lines {
				if i := strings.Index(l, " w-7 "); i >= 0 {
					got = l[i:]
				}
			}
			for _, w := range want {
				if got == w {
					return
				}
			}
		}
		t.Fatalf("upstream %d lists %q, want one of %q", id, got, want)
	}
	w := dialGW(t, st.addr)
	w.send(codec.SetClientID, "w-7")
	w.send(codec.CanDo, "a")
	w.send(codec.CanDoTimeout, "b", "1000")
	w.send(codec.CanDo, "local.c")
	w.quiet()
	for id := 1; id <= 2; id++ {
		expect(id, " w-7 : a b", " w-7 : b a")
	}
	w.send(codec.CantDo, "a")
	w.quiet()
	for id := 1; id <= 2; id++ {
		expect(id, " w-7 : b")
	}
	w.send(codec.ResetAbilities)
	w.quiet()
	for id := 1; id <= 2; id++ {
		expect(id, " w-7 :")
	}
	// The merged listing through the gateway lists the connection once.
	a := dialGW(t, st.addr)
	a.write([]byte("workers\n"))
	_ = a.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n := 0
	for {
		f, err := a.r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if string(f.Text) == "." {
			break
		}
		if strings.Contains(string(f.Text), " w-7 :") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the worker is listed %d times, want once (its upstream sessions are the gateway's)", n)
	}
}
