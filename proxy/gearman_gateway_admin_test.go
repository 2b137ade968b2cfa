package proxy

import (
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// startAdminGateway is a gateway in front of the local engine and the two
// gearmand at up (backends g1 and g2): "local." and "ERR local" go to the
// local engine, "mix." to a shard pool of local, g1 and g2, "fo." to a
// failover pool g2, g1, and every other function to a shard pool of g1
// and g2.
func startAdminGateway(t *testing.T, up []string) (string, *GearmanServer) {
	t.Helper()
	return startGearmanGateway(t, adminGatewayConfig(t, up), gearman.Config{HandlePrefix: "H:jobgate"})
}

// adminGatewayConfig is startAdminGateway's configuration.
func adminGatewayConfig(t *testing.T, up []string) *config.Config {
	t.Helper()
	c := config.Default()
	for i, a := range up {
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address = "g"+string(rune('1'+i)), i+1, config.TypeGearman, a
		b.IOTimeout, b.DialTimeout = 3*time.Second, time.Second
		c.Backends = append(c.Backends, b)
	}
	c.Pools = []config.Pool{
		{Name: "shard", Strategy: config.StrategyShard, Backends: []string{"g1", "g2"}},
		{Name: "mix", Strategy: config.StrategyShard, Backends: []string{config.LocalName, "g1", "g2"}},
		{Name: "fo", Strategy: config.StrategyFailover, Backends: []string{"g2", "g1"}},
	}
	c.Routes.Gearman = []config.Route{
		{Prefix: "local.", Backend: config.LocalName},
		{Exact: "ERR local", Backend: config.LocalName},
		{Prefix: "mix.", Pool: "mix"},
		{Prefix: "fo.", Pool: "fo"},
	}
	c.Routes.GearmanDefault = "shard"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// adminListing sends an admin line on a new connection to addr and
// returns the listing's lines, without the final ".".
func adminListing(t *testing.T, addr, line string) []string {
	t.Helper()
	c := dialGW(t, addr)
	defer c.nc.Close()
	c.write([]byte(line + "\n"))
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out []string
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			t.Fatalf("%s on %s: %v", line, addr, err)
		}
		if f.Kind != codec.KindText {
			t.Fatalf("%s on %s: %v", line, addr, f.String())
		}
		if string(f.Text) == "." {
			return out
		}
		out = append(out, string(f.Text))
	}
}

// gearadminLines runs gearadmin with option (--status, --priority-status,
// --workers) against addr and returns its lines, sorted, without ".".
func gearadminLines(t *testing.T, addr, option string) []string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(testutil.RequireBinary(t, "gearadmin"), "-h", host, "-p", port, option).CombinedOutput()
	if err != nil {
		t.Fatalf("gearadmin %s on %s: %q %v", option, addr, out, err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && l != "." {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines
}

// waitListing polls an admin listing of addr until has(lines) holds.
func waitListing(t *testing.T, addr, line string, has func([]string) bool) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = adminListing(t, addr, line); has(got) {
			return
		}
	}
	t.Fatalf("%s on %s: %q never settled", line, addr, got)
}

// hasLines reports a predicate that lines contain every one of want.
func hasLines(want ...string) func([]string) bool {
	return func(lines []string) bool {
		for _, w := range want {
			if !slices.Contains(lines, w) {
				return false
			}
		}
		return true
	}
}

// gatewayWorker connects a worker to the gateway at gw for fns and waits
// until every upstream in up lists it as one worker of each.
func gatewayWorker(t *testing.T, gw string, up []string, fns ...string) *gwClient {
	t.Helper()
	w := dialGW(t, gw)
	for _, fn := range fns {
		w.send(codec.CanDo, fn)
	}
	w.quiet()
	for _, u := range up {
		waitListing(t, u, "status", hasWorkers(1, fns...))
	}
	return w
}

// hasWorkers reports a predicate that a status listing has n workers for
// each of fns.
func hasWorkers(n int, fns ...string) func([]string) bool {
	return func(lines []string) bool {
		for _, fn := range fns {
			found := false
			for _, l := range lines {
				f := strings.Split(strings.TrimPrefix(l, fn+"\t"), "\t")
				found = found || (strings.HasPrefix(l, fn+"\t") && len(f) == 3 && f[2] == strconv.Itoa(n))
			}
			if !found {
				return false
			}
		}
		return true
	}
}

// startCLIWorker runs the gearman CLI as a worker of fns on addr until
// the test ends.
func startCLIWorker(t *testing.T, addr string, fns ...string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	args := []string{"-w", "-h", host, "-p", port}
	for _, fn := range fns {
		args = append(args, "-f", fn)
	}
	cmd := exec.Command(testutil.RequireBinary(t, "gearman"), append(args, "--", "cat")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
}

// TestGearmanGatewayAdminCountsWorkersOnce checks that the merged "status"
// and "prioritystatus" count a worker of a function whose pool has
// several backends (shard, failover, local plus upstreams) once, as one
// gearmand counts it, while jobs queued and running are summed: the same
// workers and jobs on one real gearmand and through the gateway in front
// of two give the same gearadmin listings.
func TestGearmanGatewayAdminCountsWorkersOnce(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	ref := testutil.StartGearmand(t)
	gw, _ := startAdminGateway(t, up)
	fns := []string{"s.a", "local.b", "mix.c", "fo.d"}
	for _, addr := range []string{gw, ref} {
		startCLIWorker(t, addr, fns...)
		startCLIWorker(t, addr, fns...)
	}
	// Settled: every registration of the two CLI workers is where the
	// gateway sends it (each upstream of the pools, the local engine),
	// and the reference lists them.
	for _, u := range up {
		waitListing(t, u, "status", hasLines("s.a\t0\t0\t2", "mix.c\t0\t0\t2", "fo.d\t0\t0\t2"))
	}
	waitListing(t, gw, "status", hasLines("local.b\t0\t0\t2"))
	waitListing(t, ref, "status", hasLines("s.a\t0\t0\t2", "local.b\t0\t0\t2", "mix.c\t0\t0\t2", "fo.d\t0\t0\t2"))

	// The same jobs, queued and running, on both.
	for _, addr := range []string{gw, ref} {
		c := dialGW(t, addr)
		for _, j := range []struct {
			typ codec.Type
			fn  string
		}{
			{codec.SubmitJobBg, "s.q"}, {codec.SubmitJobHighBg, "s.q"}, {codec.SubmitJobLowBg, "s.q"},
			{codec.SubmitJobBg, "mix.q"}, {codec.SubmitJobLowBg, "mix.q"},
			{codec.SubmitJobBg, "s.h"}, {codec.SubmitJobBg, "s.h"},
		} {
			c.send(j.typ, j.fn, "", "x")
			c.expect(codec.JobCreated)
		}
		// A raw worker of s.h holds one of its jobs until the test ends.
		w := dialGW(t, addr)
		w.send(codec.CanDo, "s.h")
		w.send(codec.GrabJob)
		w.expect(codec.JobAssign)
	}
	for _, u := range up {
		// s.h's worker is registered on both upstreams.
		waitListing(t, u, "status", func(lines []string) bool {
			for _, l := range lines {
				if strings.HasPrefix(l, "s.h\t") && strings.HasSuffix(l, "\t1") {
					return true
				}
			}
			return false
		})
	}
	for _, opt := range []string{"--status", "--priority-status"} {
		got, want := gearadminLines(t, gw, opt), gearadminLines(t, ref, opt)
		if !slices.Equal(got, want) {
			t.Errorf("gearadmin %s through the gateway:\n%q\none gearmand with the same workers and jobs:\n%q", opt, got, want)
		}
	}
}

// TestGearmanGatewayAdminTabInName checks that function names holding
// tabs (gearmand takes any byte but NUL) or looking like an error answer
// come out of the merged listings byte-exact, with their counts, as one
// gearmand prints them.
func TestGearmanGatewayAdminTabInName(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	ref := testutil.StartGearmand(t)
	gw, _ := startAdminGateway(t, up)
	fns := []string{"s\tt", "s\t1\t2", "local.\tx", "mix.\ty\t", "ERR local", "ERR s"}
	for _, addr := range []string{gw, ref} {
		w := dialGW(t, addr)
		c := dialGW(t, addr)
		for _, fn := range fns {
			w.send(codec.CanDo, fn)
			c.send(codec.SubmitJobBg, fn, "", "x")
			c.expect(codec.JobCreated)
			c.send(codec.SubmitJobHighBg, fn, "", "y")
			c.expect(codec.JobCreated)
		}
		w.quiet()
	}
	for _, u := range up {
		waitListing(t, u, "status", hasWorkers(1, "s\tt", "s\t1\t2", "mix.\ty\t", "ERR s"))
	}
	waitListing(t, ref, "status", hasWorkers(1, fns...))
	for _, opt := range []string{"--status", "--priority-status"} {
		got, want := gearadminLines(t, gw, opt), gearadminLines(t, ref, opt)
		if !slices.Equal(got, want) {
			t.Errorf("gearadmin %s through the gateway:\n%q\none gearmand with the same workers and jobs:\n%q", opt, got, want)
		}
	}
}

func TestSumListing(t *testing.T) {
	parts := [][]string{
		{"a\tb\t1\t0\t2", "garbage", "c\t5\t0\t1"},
		{"a\tb\t2\t1\t2", "d\tx\t1\t1", "c\t1\t0\t1", "\t3\t0\t0"},
	}
	got := string(sumListing(nil, parts, 3, map[string]uint64{"a\tb": 1, "c": 5}))
	// a\tb: 4 registrations, one extra: 3. c: more extra than counted
	// leaves the largest single count.
	want := "a\tb\t3\t1\t3\ngarbage\nc\t6\t0\t1\nd\tx\t1\t1\n\t3\t0\t0\n"
	if got != want {
		t.Fatalf("sumListing:\n%q\nwant\n%q", got, want)
	}
	if got := listingLines("ERR UNKNOWN_COMMAND x\n"); got != nil {
		t.Fatalf("an error answer has lines %q", got)
	}
	if got := listingLines("ERR f\t1\t0\t0\n.\n"); !slices.Equal(got, []string{"ERR f\t1\t0\t0"}) {
		t.Fatalf("a function named ERR f: %q", got)
	}
}

// workerLines is a "workers" listing without each line's fd and address,
// which differ between servers, with each line's functions sorted, sorted.
func workerLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		f := strings.SplitN(l, " ", 3)
		if len(f) < 3 {
			out = append(out, l)
			continue
		}
		id, fns, _ := strings.Cut(f[2], " :")
		names := strings.Fields(fns)
		slices.Sort(names)
		out = append(out, id+" :"+strings.Join(names, ","))
	}
	slices.Sort(out)
	return out
}

// TestGearmanGatewayAdminWorkersListedOnce checks that the merged
// "workers" listing shows each connection to the gateway once, with every
// function it registered wherever its pools put them, and the
// connections straight to an upstream as the upstream lists them: as one
// gearmand lists the same connections.
func TestGearmanGatewayAdminWorkersListedOnce(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	ref := testutil.StartGearmand(t)
	gw, _ := startAdminGateway(t, up)
	for _, addr := range []string{gw, ref} {
		startCLIWorker(t, addr, "s.a", "local.b", "mix.c", "fo.d")
		startCLIWorker(t, addr, "s.a", "local.b", "mix.c", "fo.d")
		w := dialGW(t, addr)
		w.send(codec.SetClientID, "w 1")
		w.send(codec.CanDo, "s.x")
		w.send(codec.CanDo, "x y")
		w.send(codec.CanDo, "local.z")
		w.quiet()
		c := dialGW(t, addr)
		c.send(codec.SubmitJobBg, "s.q", "", "x")
		c.expect(codec.JobCreated)
	}
	// A worker straight on the first upstream, and its twin on the
	// reference.
	for _, addr := range []string{up[0], ref} {
		w := dialGW(t, addr)
		w.send(codec.SetClientID, "direct")
		w.send(codec.CanDo, "s.a")
		w.quiet()
	}
	waitListing(t, up[0], "status", hasWorkers(3, "s.a"))
	waitListing(t, up[1], "status", hasWorkers(2, "s.a"))
	for _, u := range up {
		waitListing(t, u, "status", hasWorkers(2, "mix.c", "fo.d"))
		waitListing(t, u, "status", hasWorkers(1, "s.x", "x y"))
	}
	waitListing(t, gw, "status", hasWorkers(2, "local.b"))
	waitListing(t, ref, "status", hasWorkers(3, "s.a"))
	waitListing(t, ref, "status", hasWorkers(1, "s.x", "x y", "local.z"))
	got, want := workerLines(gearadminLines(t, gw, "--workers")), workerLines(gearadminLines(t, ref, "--workers"))
	if !slices.Equal(got, want) {
		t.Errorf("gearadmin --workers through the gateway:\n%q\none gearmand with the same connections:\n%q", got, want)
	}
	// And the status counts the direct worker and the gateway's once each.
	if got, want := gearadminLines(t, gw, "--status"), gearadminLines(t, ref, "--status"); !slices.Equal(got, want) {
		t.Errorf("gearadmin --status through the gateway:\n%q\none gearmand:\n%q", got, want)
	}
}

// TestGearmanGatewayAdminWorkerLeaves checks that a worker that
// disconnects leaves the gateway's set of its own sessions and the merged
// counts.
func TestGearmanGatewayAdminWorkerLeaves(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	gw, srv := startAdminGateway(t, up)
	w := gatewayWorker(t, gw, up, "s.a", "mix.b")
	if got := gearadminLines(t, gw, "--status"); !slices.Equal(got, []string{"mix.b\t0\t0\t1", "s.a\t0\t0\t1"}) {
		t.Fatalf("status with one worker: %q", got)
	}
	w.nc.Close()
	for _, u := range up {
		waitListing(t, u, "status", hasWorkers(0, "s.a", "mix.b"))
	}
	waitListing(t, gw, "status", hasLines("mix.b\t0\t0\t0", "s.a\t0\t0\t0"))
	for deadline := time.Now().Add(5 * time.Second); len(srv.gw.own.snapshot()) > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions left in the gateway's set", len(srv.gw.own.snapshot()))
		}
	}
}

func TestTakeOwnWorkerLines(t *testing.T) {
	own := map[string][][]string{
		"-":     {nil, {"a", "b"}},
		"my id": {{"x y", "z"}},
		"":      {{"f"}},
		"a":     {{"b", ":", "z"}},
		"a :b":  {{"f"}},
	}
	for _, c := range []struct {
		line string
		own  bool
	}{
		{"15 127.0.0.1 - : b a", true},
		{"16 127.0.0.1 - : b a", false}, // taken already
		{"17 10.0.0.1 - : a", false},    // not the same functions
		{"18 127.0.0.1 - :", true},
		{"19 127.0.0.1 - :", false},
		{"20 127.0.0.1 my id : z x y", true},
		{"21 127.0.0.1  : f", true},
		{"23 127.0.0.1 a :b : z", false}, // "a :b" is not "a" with functions "b : z"
		{"24 127.0.0.1 a :b : f", true},
		{"garbage", false},
		{"22 127.0.0.1", false},
	} {
		if got := takeOwn(own, c.line); got != c.own {
			t.Errorf("takeOwn(%q) = %v, want %v", c.line, got, c.own)
		}
	}
	for l, want := range map[string]bool{
		"15 127.0.0.1 jobgate.admin :":   true,
		"15 127.0.0.1 jobgate.admin : f": false, // a worker with that id
		"15 127.0.0.1 - :":               false,
		"jobgate.admin :":                false,
	} {
		if got := isAdminLine(l); got != want {
			t.Errorf("isAdminLine(%q) = %v, want %v", l, got, want)
		}
	}
}
