//go:build linux

package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/routing/upstream"
)

// Tests of background submits on shared lines (gearman_gateway_bgline.go).

// upstreamWorkers returns upstream id's "workers" listing (its own admin
// connection's line included).
func (st *gwSetup) upstreamWorkers(t *testing.T, id int) []string {
	t.Helper()
	lines, err := st.admins[id-1].Admin(context.Background(), "workers")
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// checkOnlyLines checks gearmand's own listing (backend 1): the lines and
// the admin connection asking, all with jobgate's id; none of the
// connections of the gateway's clients.
func (st *gwSetup) checkOnlyLines(t *testing.T, clients int) {
	t.Helper()
	ws := st.upstreamWorkers(t, 1)
	if len(ws) > gwLinesPer+1 {
		t.Fatalf("gearmand has %d connections for %d clients, want at most %d lines and the admin connection: %q",
			len(ws), clients, gwLinesPer, ws)
	}
	for _, l := range ws {
		if !strings.Contains(l, " "+upstream.GearmanAdminClientID+" :") {
			t.Fatalf("gearmand lists %q, not one of jobgate's own", l)
		}
	}
}

// TestGearmanGatewayBgLineShared: the background submits of many client
// connections reach gearmand over at most gwLinesPer connections, every
// job lands, and each client gets its own handles; the merged "workers"
// listing shows the clients, not the lines.
func TestGearmanGatewayBgLineShared(t *testing.T) {
	// No health probes: their connections would join gearmand's listing.
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.HealthInterval = 0 })
	const clients, jobs = 8, 30
	fn := st.fnOwnedBy(t, "f", 1)
	cs := make([]*gwClient, clients)
	for i := range cs {
		cs[i] = dialGW(t, st.addr)
	}
	// Every client pipelines all its submits, with an ECHO among them
	// that the gateway answers itself, before any reply is read.
	for i, c := range cs {
		var batch []byte
		for j := range jobs {
			typ := []codec.Type{codec.SubmitJobBg, codec.SubmitJobHighBg, codec.SubmitJobLowBg}[j%3]
			batch = append(batch, pkt(typ, fn, "", fmt.Sprintf("job-%d-%d", i, j))...)
			if j == jobs/2 {
				batch = append(batch, pkt(codec.EchoReq, "half")...)
			}
		}
		c.write(batch)
	}
	seen := map[string]bool{}
	for _, c := range cs {
		for j := range jobs {
			h := string(c.expect(codec.JobCreated).Args[0])
			if !strings.HasPrefix(h, "@1:H:") || seen[h] {
				t.Fatalf("handle %q: want a new one of backend 1", h)
			}
			seen[h] = true
			if j == jobs/2 {
				c.expect(codec.EchoRes)
			}
		}
	}
	loopServed(t, st.srv)
	if got, want := st.upstreamStatus(t, 1, fn), fmt.Sprintf("%s\t%d\t0\t0", fn, clients*jobs); got != want {
		t.Fatalf("gearmand: %q, want %q", got, want)
	}
	st.checkOnlyLines(t, clients)
	// Through the gateway, gearadmin lists each client connection once,
	// and its own.
	ws := gearadminLines(t, st.addr, "--workers")
	if len(ws) != clients+1 {
		t.Fatalf("gearadmin --workers lists %d connections, want %d clients and its own: %q", len(ws), clients, ws)
	}
	for _, l := range ws {
		if strings.Contains(l, upstream.GearmanAdminClientID) {
			t.Fatalf("gearadmin --workers lists a line: %q", ws)
		}
	}
}

// TestGearmanGatewayBgLineOrder: a client that pipelines a background
// submit (on the line), the exceptions option and a foreground submit
// (its own session, dialled) and another background one (then on its own
// session too) gets its replies in request order, with the gateway's own
// answers among them, and gearmand queued the jobs in that order: the dial
// waited for the line.
func TestGearmanGatewayBgLineOrder(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t)}, config.Breaker{})
	fn := st.fnOwnedBy(t, "f", 1)
	c := dialGW(t, st.addr)
	var batch []byte
	batch = append(batch, pkt(codec.SubmitJobBg, fn, "", "a")...)
	batch = append(batch, pkt(codec.EchoReq, "e")...)
	batch = append(batch, pkt(codec.SubmitJobBg, "local.x", "", "l")...)
	batch = append(batch, pkt(codec.OptionReq, "exceptions")...)
	batch = append(batch, pkt(codec.SubmitJob, fn, "", "b")...)
	batch = append(batch, pkt(codec.SubmitJobBg, fn, "", "c")...)
	c.write(batch)
	for i, want := range []string{"@1:H:", "e", "H:jobgate:", "exceptions", "@1:H:", "@1:H:"} {
		p := c.next()
		if p.Type != codec.JobCreated && p.Type != codec.EchoRes && p.Type != codec.OptionRes ||
			!strings.HasPrefix(string(p.Args[0]), want) {
			t.Fatalf("reply %d: %v, want %q", i, p.String(), want)
		}
	}
	w := dialGW(t, st.up[0]) // a worker on gearmand itself
	w.send(codec.CanDo, fn)
	for _, want := range []string{"a", "b", "c"} {
		w.send(codec.GrabJob)
		if p := w.expect(codec.JobAssign); string(p.Args[2]) != want {
			t.Fatalf("gearmand assigned %q, want %q", p.Args[2], want)
		}
	}
}

// TestGearmanGatewayBgLineFails: a line whose backend stops answering
// fails at its I/O timeout: each submit waiting on it gets ERROR
// QUEUE_ERROR, the connections go on, and the next background submit
// opens a new line.
func TestGearmanGatewayBgLineFails(t *testing.T) {
	var accepted atomic.Int32
	mute := listenTest(t, func(nc net.Conn) {
		accepted.Add(1)
		_, _ = io.Copy(io.Discard, nc) // reads, never answers
	})
	st := startGatewaySetup(t, []string{mute}, config.Breaker{}, func(b *config.Backend) {
		b.IOTimeout, b.HealthInterval = 200*time.Millisecond, 0
	})
	fn := st.fnOwnedBy(t, "f", 1)
	a, b := dialGW(t, st.addr), dialGW(t, st.addr)
	for _, c := range []*gwClient{a, b} {
		c.send(codec.SubmitJobBg, fn, "", "x")
	}
	for _, c := range []*gwClient{a, b} {
		if p := c.expect(codec.Error); string(p.Args[0]) != string(codec.CodeQueueError) ||
			!strings.Contains(string(p.Args[1]), "backend g1 failed") {
			t.Fatalf("want the backend's failure, got %v", p.String())
		}
		c.quiet()
	}
	before := accepted.Load()
	a.send(codec.SubmitJobBg, fn, "", "y")
	a.expect(codec.Error)
	if accepted.Load() <= before {
		t.Fatalf("no new line: %d connections before the submit, %d after", before, accepted.Load())
	}
}

// TestGearmanGatewayBgLineRetired: a reload that routes elsewhere closes
// the old backend's line once its grace has passed.
func TestGearmanGatewayBgLineRetired(t *testing.T) {
	grace := gwLineRetireGrace
	gwLineRetireGrace = func(*gwRouting) time.Duration { return 100 * time.Millisecond }
	t.Cleanup(func() { gwLineRetireGrace = grace })
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	addr, srv := startGearmanGateway(t, reloadConfig(t, up, "g1"), gearman.Config{})
	c := dialGW(t, addr)
	c.send(codec.SubmitJobBg, "moved.a", "", "x")
	if p := c.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "@1:") {
		t.Fatalf("before the reload: %v", p.String())
	}
	g1, err := upstream.NewGearman(upstream.GearmanConfig{Config: upstream.Config{Addr: up[0], IOTimeout: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	conns := func() int {
		ls, err := g1.Admin(context.Background(), "workers")
		if err != nil {
			t.Fatal(err)
		}
		return len(ls) // the line(s) and this admin connection
	}
	if n := conns(); n != 2 {
		t.Fatalf("g1 lists %d connections, want the line and the admin one", n)
	}
	apply, err := srv.PrepareReload(reloadConfig(t, up, "g2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	c.send(codec.SubmitJobBg, "moved.a", "", "y")
	if p := c.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "@2:") {
		t.Fatalf("after the reload: %v", p.String())
	}
	for deadline := time.Now().Add(15 * time.Second); conns() != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the line to g1 stayed open after the reload")
		}
	}
}

// TestGearmanGatewayBgLineKilled: gearmand dies while the lines carry the
// pipelined submits of several clients. Each client gets one reply per
// submit, in order: JOB_CREATED for those gearmand answered, then ERROR
// for the rest; none is lost or given to another client, and every
// connection goes on.
func TestGearmanGatewayBgLineKilled(t *testing.T) {
	port := testutil.FreePort(t)
	g := ownGearmand(t, port)
	st := startGatewaySetup(t, []string{net.JoinHostPort("127.0.0.1", fmt.Sprint(port))}, config.Breaker{},
		func(b *config.Backend) { b.HealthInterval = 0 })
	fn := st.fnOwnedBy(t, "f", 1)
	const clients, jobs = 4, 200
	cs := make([]*gwClient, clients)
	for i := range cs {
		cs[i] = dialGW(t, st.addr)
		cs[i].send(codec.SubmitJobBg, fn, "", "open") // the lines are open
		cs[i].expect(codec.JobCreated)
	}
	body := strings.Repeat("b", 1024)
	for _, c := range cs {
		var batch []byte
		for range jobs {
			batch = append(batch, pkt(codec.SubmitJobBg, fn, "", body)...)
		}
		c.write(batch)
	}
	_ = g.Process.Kill()
	created, failed := 0, 0
	for i, c := range cs {
		erred := false
		for j := range jobs {
			p := c.next()
			switch {
			case p.Type == codec.JobCreated && !erred && strings.HasPrefix(string(p.Args[0]), "@1:"):
				created++
			case p.Type == codec.Error && string(p.Args[0]) == string(codec.CodeQueueError):
				erred = true
				failed++
			default:
				t.Fatalf("client %d, reply %d: %v", i, j, p.String())
			}
		}
		c.quiet()
	}
	t.Logf("%d submits created, %d failed", created, failed)
}

// TestGearmanGatewayBgLineDialShared: clients whose background submits
// need the same line while its backend does not answer wait for one dial,
// not one each, and then fail over to the next backend of the pool.
func TestGearmanGatewayBgLineDialShared(t *testing.T) {
	const dialTimeout = 1500 * time.Millisecond
	st := startGatewaySetup(t, []string{hangingListener(t), testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.DialTimeout, b.HealthInterval = dialTimeout, 0 })
	fn := st.fnOwnedBy(t, "f", 1)
	const clients = 3 * gwLinesPer // three waiting on each line's dial
	cs := make([]*gwClient, clients)
	for i := range cs {
		cs[i] = dialGW(t, st.addr)
		cs[i].quiet()
	}
	start := time.Now()
	for _, c := range cs {
		c.send(codec.SubmitJobBg, fn, "", "x")
	}
	for i, c := range cs {
		if h := string(c.expect(codec.JobCreated).Args[0]); !strings.HasPrefix(h, "@2:") {
			t.Fatalf("client %d: handle %q, want g2's", i, h)
		}
	}
	if d := time.Since(start); d >= 2*dialTimeout {
		t.Fatalf("%d clients waited %v for the blackholed backend (dial timeout %v)", clients, d, dialTimeout)
	}
}
