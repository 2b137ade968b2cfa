//go:build linux

package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing/upstream"
)

// Tests of foreground submits on shared lines (gearman_gateway_fgline.go),
// against a real gearmand, with its worker connected to gearmand itself.

// gwSessionOf returns the gateway session of client c.
func gwSessionOf(t *testing.T, srv *GearmanServer, c *gwClient) *gwSession {
	t.Helper()
	c.quiet() // the gateway has taken the connection in
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for gc := range srv.conns {
		if gc.nc.RemoteAddr().String() == c.nc.LocalAddr().String() {
			return gc.sess.(*gwSession)
		}
	}
	t.Fatal("no gateway session for the client")
	return nil
}

// TestGearmanGatewayFgLineShared: the foreground submits of many clients
// reach gearmand over the lines, and each client gets the WORK_DATA,
// WORK_STATUS and WORK_COMPLETE of its own jobs, and nothing else.
func TestGearmanGatewayFgLineShared(t *testing.T) {
	// No health probes: their connections would join gearmand's listing.
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.HealthInterval = 0 })
	const clients, jobs = 6, 3
	fn := st.fnOwnedBy(t, "f", 1)
	cs := make([]*gwClient, clients)
	for i := range cs {
		cs[i] = dialGW(t, st.addr)
		var batch []byte
		for j := range jobs {
			typ := []codec.Type{codec.SubmitJob, codec.SubmitJobHigh, codec.SubmitJobLow}[j]
			batch = append(batch, pkt(typ, fn, "", fmt.Sprintf("%d-%d", i, j))...)
		}
		cs[i].write(batch)
	}
	owned := make([]map[string]string, clients) // per client: handle → data
	for i, c := range cs {
		owned[i] = map[string]string{}
		for j := range jobs {
			owned[i][string(c.expect(codec.JobCreated).Args[0])] = fmt.Sprintf("%d-%d", i, j)
		}
	}
	st.checkOnlyLines(t, clients)
	w := dialGW(t, st.up[0])
	w.send(codec.CanDo, fn)
	for range clients * jobs {
		w.send(codec.GrabJob)
		a := w.expect(codec.JobAssign)
		h, data := string(a.Args[0]), string(a.Args[2])
		w.send(codec.WorkData, h, "d:"+data)
		w.send(codec.WorkStatus, h, "1", "2")
		w.send(codec.WorkComplete, h, "r:"+data)
	}
	for i, c := range cs {
		for range jobs {
			d := c.expect(codec.WorkData)
			data, ok := owned[i][string(d.Args[0])]
			if !ok || string(d.Args[1]) != "d:"+data {
				t.Fatalf("client %d: %v, not of its jobs %v", i, d.String(), owned[i])
			}
			if p := c.expect(codec.WorkStatus); string(p.Args[0]) != string(d.Args[0]) || string(p.Args[1]) != "1" {
				t.Fatalf("client %d: %v after %v", i, p.String(), d.String())
			}
			if p := c.expect(codec.WorkComplete); string(p.Args[0]) != string(d.Args[0]) || string(p.Args[1]) != "r:"+data {
				t.Fatalf("client %d: %v after %v", i, p.String(), d.String())
			}
			delete(owned[i], string(d.Args[0]))
		}
		c.quiet()
	}
}

// TestGearmanGatewayFgLineCoalesced: clients that submit the same unique
// id, two of them on one line, one also in the background, attach to one
// job, queued or running, and each hears of it once per foreground
// submit.
func TestGearmanGatewayFgLineCoalesced(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t)}, config.Breaker{})
	fn := st.fnOwnedBy(t, "f", 1)
	cs := make([]*gwClient, 3)
	for i := range cs {
		cs[i] = dialGW(t, st.addr)
	}
	if a, b := gwSessionOf(t, st.srv, cs[0]), gwSessionOf(t, st.srv, cs[2]); a.lineSlot != b.lineSlot {
		t.Fatalf("clients 0 and 2 on lines %d and %d: the test wants them on one", a.lineSlot, b.lineSlot)
	}
	cs[0].send(codec.SubmitJob, fn, "u", "x")
	h := string(cs[0].expect(codec.JobCreated).Args[0])
	cs[2].send(codec.SubmitJobBg, fn, "u", "x") // attaches no client
	cs[2].send(codec.SubmitJob, fn, "u", "x")
	for range 2 {
		if p := cs[2].expect(codec.JobCreated); string(p.Args[0]) != h {
			t.Fatalf("client 2: %v, want %q", p.String(), h)
		}
	}
	w := dialGW(t, st.up[0])
	w.send(codec.CanDo, fn)
	w.send(codec.GrabJob)
	gh := string(w.expect(codec.JobAssign).Args[0])
	w.send(codec.WorkData, gh, "early") // before client 1 attaches
	cs[0].expect(codec.WorkData)
	cs[2].expect(codec.WorkData)
	cs[1].send(codec.SubmitJob, fn, "u", "x") // while it runs
	if p := cs[1].expect(codec.JobCreated); string(p.Args[0]) != h {
		t.Fatalf("client 1: %v, want %q", p.String(), h)
	}
	w.send(codec.WorkData, gh, "late")
	w.send(codec.WorkComplete, gh, "done")
	for i, c := range cs {
		if p := c.expect(codec.WorkData); string(p.Args[1]) != "late" {
			t.Fatalf("client %d: %v, want the late WORK_DATA", i, p.String())
		}
		if p := c.expect(codec.WorkComplete); string(p.Args[0]) != h || string(p.Args[1]) != "done" {
			t.Fatalf("client %d: %v", i, p.String())
		}
		c.quiet()
	}
}

// TestGearmanGatewayFgLineClientLeaves: a client that leaves with a
// foreground job queued on a line its neighbour's running job holds open:
// the line takes no more submits and closes when that job completes, and
// gearmand then drops the queued job, which no worker gets, as it would
// had the client been connected to it.
func TestGearmanGatewayFgLineClientLeaves(t *testing.T) {
	// No health probes: their connections would join gearmand's listing.
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t)}, config.Breaker{},
		func(b *config.Backend) { b.HealthInterval = 0 })
	fn := st.fnOwnedBy(t, "f", 1)
	stays, between, leaves := dialGW(t, st.addr), dialGW(t, st.addr), dialGW(t, st.addr)
	gwSessionOf(t, st.srv, between) // it takes the other line's slot
	s := gwSessionOf(t, st.srv, leaves)
	if a := gwSessionOf(t, st.srv, stays); a.lineSlot != s.lineSlot {
		t.Fatalf("the clients are on lines %d and %d: the test wants them on one", a.lineSlot, s.lineSlot)
	}
	stays.send(codec.SubmitJob, fn, "", "runs")
	h := string(stays.expect(codec.JobCreated).Args[0])
	w := dialGW(t, st.up[0])
	w.send(codec.CanDo, fn)
	w.send(codec.GrabJob)
	gh := string(w.expect(codec.JobAssign).Args[0])
	leaves.send(codec.SubmitJob, fn, "", "abandoned")
	leaves.expect(codec.JobCreated)
	l := st.srv.gw.lines.get(s.lineKey(st.byID[1]))
	leaves.nc.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		retired := l.retired
		l.mu.Unlock()
		if retired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the line did not retire when the client left")
		}
	}
	// The line still carries the running job: gearmand keeps both.
	if got, want := st.upstreamStatus(t, 1, fn), fn+"\t2\t1\t1"; got != want {
		t.Fatalf("gearmand: %q, want %q", got, want)
	}
	w.send(codec.WorkComplete, gh, "ok")
	if p := stays.expect(codec.WorkComplete); string(p.Args[0]) != h {
		t.Fatalf("got %v", p.String())
	}
	// The line closes, and gearmand sees it go: its listing keeps only
	// the admin connection of jobgate's.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := 0
		for _, x := range st.upstreamWorkers(t, 1) {
			if strings.Contains(x, " "+upstream.GearmanAdminClientID+" :") {
				n++
			}
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line is still open: %q", st.upstreamWorkers(t, 1))
		}
	}
	w.send(codec.GrabJob)
	w.expect(codec.NoJob)
	if got, want := st.upstreamStatus(t, 1, fn), fn+"\t0\t0\t1"; got != want {
		t.Fatalf("gearmand: %q, want %q", got, want)
	}
	// The client that stayed goes on, on a new line.
	stays.send(codec.SubmitJob, fn, "", "next")
	h = string(stays.expect(codec.JobCreated).Args[0])
	w.send(codec.GrabJob)
	a := w.expect(codec.JobAssign)
	if string(a.Args[2]) != "next" {
		t.Fatalf("the worker got %v", a.String())
	}
	w.send(codec.WorkComplete, string(a.Args[0]), "ok")
	if p := stays.expect(codec.WorkComplete); string(p.Args[0]) != h {
		t.Fatalf("got %v", p.String())
	}
}
