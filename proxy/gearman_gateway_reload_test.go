package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// reloadConfig routes functions starting "moved." to backend target (g1
// or g2, the gearmands at up) and every other function to the local
// engine.
func reloadConfig(t *testing.T, up []string, target string) *config.Config {
	t.Helper()
	c := config.Default()
	for i, a := range up {
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address = fmt.Sprintf("g%d", i+1), i+1, config.TypeGearman, a
		b.IOTimeout, b.DialTimeout, b.HealthInterval = 3*time.Second, time.Second, 0
		c.Backends = append(c.Backends, b)
	}
	c.Routes.Gearman = []config.Route{{Prefix: "moved.", Backend: target}}
	c.Routes.GearmanDefault = config.LocalName
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGearmanGatewayReloadRoutes: a reload moves a route to another
// upstream; the very connection that submitted before the reload submits
// after it to the new backend, and a worker connected before it still
// completes the job it took from the old one.
func TestGearmanGatewayReloadRoutes(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	addr, srv := startGearmanGateway(t, reloadConfig(t, up, "g1"), gearman.Config{HandlePrefix: "H:jobgate"})

	client := glDial(t, addr)
	client.send(t, codec.SubmitJobBg, "moved.a", "", "before")
	if h := string(client.expect(t, codec.JobCreated, "submit before").Args[0]); !strings.HasPrefix(h, "@1:") {
		t.Fatalf("before the reload the job went to %q, want backend 1", h)
	}
	worker := glDial(t, addr)
	worker.send(t, codec.CanDo, "moved.a")
	worker.send(t, codec.GrabJob)
	job := worker.expect(t, codec.JobAssign, "grab from g1")

	apply, err := srv.PrepareReload(reloadConfig(t, up, "g2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	apply()

	client.send(t, codec.SubmitJobBg, "moved.a", "", "after")
	if h := string(client.expect(t, codec.JobCreated, "submit after").Args[0]); !strings.HasPrefix(h, "@2:") {
		t.Fatalf("after the reload the job went to %q, want backend 2", h)
	}
	client.send(t, codec.SubmitJobBg, "elsewhere", "", "local")
	if h := string(client.expect(t, codec.JobCreated, "submit local").Args[0]); strings.HasPrefix(h, "@") {
		t.Fatalf("unrouted function went to %q, want the local engine", h)
	}
	// The job taken before the reload completes on g1, through the
	// unchanged backend: g1 then has no job left.
	worker.send(t, codec.WorkComplete, string(job.Args[0]), "")
	worker.send(t, codec.EchoReq, "sync")
	worker.expect(t, codec.EchoRes, "worker after the reload")
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := gearadminStatus(t, up[0])
		if !strings.Contains(st, "moved.a\t1\t") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("g1 still holds the completed job:\n%s", st)
		}
		time.Sleep(10 * time.Millisecond) // WORK_COMPLETE has no reply to wait for
	}
	if st := gearadminStatus(t, up[1]); !strings.Contains(st, "moved.a\t1\t") {
		t.Errorf("g2 does not hold the job submitted after the reload:\n%s", st)
	}

	// A configuration that cannot be built is refused and changes nothing.
	bad := reloadConfig(t, up, "g2")
	bad.Routes.Gearman[0].Backend = "nowhere"
	if _, err := srv.PrepareReload(bad, nil); err == nil {
		t.Fatal("reload to an unknown backend accepted")
	}
	client.send(t, codec.SubmitJobBg, "moved.a", "", "still g2")
	if h := string(client.expect(t, codec.JobCreated, "submit after the refused reload").Args[0]); !strings.HasPrefix(h, "@2:") {
		t.Fatalf("after the refused reload the job went to %q, want backend 2", h)
	}
}

// gearadminStatus returns the admin "status" listing of a gearmand.
func gearadminStatus(t *testing.T, addr string) string {
	t.Helper()
	c := glDial(t, addr)
	defer c.nc.Close()
	if _, err := c.nc.Write([]byte("status\n")); err != nil {
		t.Fatal(err)
	}
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var sb strings.Builder
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if line == ".\n" {
			return sb.String()
		}
		sb.WriteString(line)
	}
}

// TestGearmanRoutesReady: /readyz's route check passes while a route's
// backend can be used and names the route once its breaker opens.
func TestGearmanRoutesReady(t *testing.T) {
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type = "g1", 1, config.TypeGearman
	b.Address = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)) // nothing listens
	b.DialTimeout, b.IOTimeout = time.Second, time.Second
	b.Breaker = config.Breaker{Failures: 1, OpenTimeout: time.Hour, HalfOpenRequests: 1}
	c.Backends = append(c.Backends, b)
	c.Routes.GearmanDefault = "g1"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	addr, srv := startGearmanGateway(t, c, gearman.Config{HandlePrefix: "H:jobgate"})
	if err := srv.RoutesReady(); err != nil {
		t.Fatalf("before any failure: %v", err)
	}
	client := glDial(t, addr)
	client.send(t, codec.SubmitJobBg, "f", "", "x")
	client.expect(t, codec.Error, "submit to a backend that is down")
	err := srv.RoutesReady()
	if err == nil || !strings.Contains(err.Error(), "g1") {
		t.Fatalf("with the breaker open: %v, want g1 named", err)
	}
}

// TestGearmanGatewayIdleTimeout: through a gateway, past idle_timeout of
// the fake clock an idle client is closed, while a worker of an upstream
// function and a client awaiting its foreground job stay, and the job
// still completes.
func TestGearmanGatewayIdleTimeout(t *testing.T) {
	up := []string{testutil.StartGearmand(t)}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	addr, _ := startGearmanGateway(t, reloadConfig(t, up, "g1"), gearman.Config{HandlePrefix: "H:jobgate", Clock: clk},
		func(c *GearmanConfig) { c.ConnLimits = Limits{IdleTimeout: 10 * time.Second} })
	idle := glDial(t, addr)
	idle.send(t, codec.EchoReq, "x")
	idle.expect(t, codec.EchoRes, "idle")
	worker := glDial(t, addr)
	worker.send(t, codec.CanDo, "moved.f")
	worker.send(t, codec.EchoReq, "sync")
	worker.expect(t, codec.EchoRes, "worker")
	client := glDial(t, addr)
	client.send(t, codec.SubmitJob, "moved.f", "", "data")
	client.expect(t, codec.JobCreated, "foreground submit")

	for i := 0; i < 8; i++ { // 16s in sweeps of 2.5s
		clk.Advance(2 * time.Second)
	}
	idle.waitClosed(t, "idle client")
	worker.send(t, codec.GrabJob)
	job := worker.expect(t, codec.JobAssign, "grab after the idle period")
	worker.send(t, codec.WorkComplete, string(job.Args[0]), "done")
	client.expect(t, codec.WorkComplete, "the waiting client")
}
