package proxy_test

import (
	"context"
	"math"
	"net"
	"strconv"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
)

// gmClient is a minimal Gearman connection for the metrics test.
type gmClient struct {
	t  *testing.T
	nc net.Conn
	rd *codec.Reader
}

func gmDial(t *testing.T, addr string) *gmClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &gmClient{t: t, nc: nc, rd: codec.NewReader(nc, codec.Limits{})}
}

func (c *gmClient) send(ty codec.Type, args ...string) {
	c.t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	if _, err := c.nc.Write(codec.AppendPacket(nil, codec.Req, ty, bs...)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *gmClient) sendText(line string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(line)); err != nil {
		c.t.Fatal(err)
	}
}

// expect reads one packet of type want and returns its arguments.
func (c *gmClient) expect(want codec.Type) []string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := c.rd.ReadFrame()
	if err != nil {
		c.t.Fatalf("want %v: %v", want, err)
	}
	if f.Kind != codec.KindPacket || f.Packet.Type != want {
		c.t.Fatalf("got %v %v %q, want %v", f.Kind, f.Packet.Type, f.Text, want)
	}
	var out []string
	for _, a := range f.Packet.Args {
		out = append(out, string(a))
	}
	return out
}

// sync makes sure every request sent so far has been handled.
func (c *gmClient) sync() {
	c.t.Helper()
	c.send(codec.EchoReq, "x")
	c.expect(codec.EchoRes)
}

// TestGearmanMetrics runs a scripted workload against a server, in its
// default mode (the epoll loop on Linux) and with goroutines, and checks
// the exact series. The goroutine run registers with CAN_DO_TIMEOUT, so
// its run times come from the timeout deadline (gearman.Engine.runTime).
func TestGearmanMetrics(t *testing.T) {
	t.Run("loop", func(t *testing.T) { gearmanMetricsWorkload(t, false) })
	t.Run("goroutines", func(t *testing.T) { gearmanMetricsWorkload(t, true) })
}

func gearmanMetricsWorkload(t *testing.T, goroutines bool) {
	canDo := "CAN_DO"
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	addr, stop, _ := gmServeStop(t, proxy.GearmanConfig{
		Engine:     gearman.Config{Clock: clk, HandlePrefix: "H:t"},
		Metrics:    m,
		Goroutines: goroutines,
	})
	defer stop()

	w, c := gmDial(t, addr), gmDial(t, addr)
	if goroutines {
		canDo = "CAN_DO_TIMEOUT"
		w.send(codec.CanDoTimeout, "resize", "60000")
	} else {
		w.send(codec.CanDo, "resize")
	}
	w.sync()
	for _, u := range []string{"u1", "u2", "u3"} {
		c.send(codec.SubmitJobBg, "resize", u, "data")
		c.expect(codec.JobCreated)
	}
	clk.Advance(2 * time.Second)
	w.send(codec.GrabJob)
	h1 := w.expect(codec.JobAssign)[0]
	clk.Advance(3 * time.Second)
	w.send(codec.WorkComplete, h1, "done")
	w.send(codec.GrabJob)
	h2 := w.expect(codec.JobAssign)[0]
	clk.Advance(time.Second)
	w.send(codec.WorkFail, h2)
	w.send(codec.GrabJobUniq)
	w.expect(codec.JobAssignUniq) // left running
	w.send(codec.WorkComplete, "H:t:999", "x")
	w.expect(codec.Error) // JOB_NOT_FOUND
	c.send(codec.OptionReq, "bogus")
	c.expect(codec.Error) // UNKNOWN_OPTION
	c.sendText("version\n")
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if f, err := c.rd.ReadFrame(); err != nil || f.Kind != codec.KindText {
		t.Fatalf("version: %v %v", f.Kind, err)
	}
	idle := gmDial(t, addr)
	idle.send(codec.GrabJob)
	idle.expect(codec.NoJob)
	idle.nc.Close()

	gm := func(cmd, res string) string {
		return `jobgate_commands_total{command="` + cmd + `",protocol="gearman",result="` + res + `"}`
	}
	fn := `{name="resize",protocol="gearman"}`
	deadline := time.Now().Add(5 * time.Second)
	for scrapeMetrics(t, m)[`jobgate_connections{protocol="gearman"}`] != 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got := scrapeMetrics(t, m)
	checkSamples(t, got, map[string]float64{
		gm(canDo, "ok"):                         1,
		gm("ECHO_REQ", "ok"):                    1,
		gm("SUBMIT_JOB_BG", "ok"):               3,
		gm("GRAB_JOB", "ok"):                    2,
		gm("GRAB_JOB", "miss"):                  1,
		gm("GRAB_JOB_UNIQ", "ok"):               1,
		gm("WORK_COMPLETE", "ok"):               1,
		gm("WORK_COMPLETE", "miss"):             1,
		gm("WORK_FAIL", "ok"):                   1,
		gm("OPTION_REQ", "client_error"):        1,
		gm("admin", "ok"):                       1,
		"jobgate_jobs_submitted_total" + fn:     3,
		"jobgate_jobs_completed_total" + fn:     1,
		"jobgate_jobs_failed_total" + fn:        1,
		"jobgate_queue_wait_seconds_count" + fn: 3,
		"jobgate_job_run_seconds_count" + fn:    2,
		"jobgate_job_run_seconds_sum" + fn:      4, // 3s + 1s
		`jobgate_queue_depth{name="resize",protocol="gearman",state="ready"}`:   0,
		`jobgate_queue_depth{name="resize",protocol="gearman",state="running"}`: 1,
		`jobgate_connections{protocol="gearman"}`:                               2,
		`jobgate_connections_accepted_total{protocol="gearman"}`:                3,
	})
	// 2s, 5s and 6s; the enqueue sequence adds a nanosecond per job (see
	// gearman.Engine.SetObserver).
	if s := got["jobgate_queue_wait_seconds_sum"+fn]; math.Abs(s-13) > 1e-6 {
		t.Errorf("queue wait sum %v, want 13", s)
	}
}

// discardOutput is a gearman.Output that drops what the engine writes.
type discardOutput struct{}

func (discardOutput) WritePacket(*codec.Packet) {}
func (discardOutput) WriteText([]byte)          {}

// TestGearmanMetricsAllocs: with metrics on, a submit/grab/complete cycle
// through engine sessions allocates no more than without.
func TestGearmanMetricsAllocs(t *testing.T) {
	cycle := func(withMetrics bool) float64 {
		cfg := proxy.GearmanConfig{Engine: gearman.Config{HandlePrefix: "H:t"}}
		if withMetrics {
			cfg.Metrics = metrics.New(metrics.Options{NoRuntimeCollectors: true})
		}
		srv, err := proxy.NewGearmanServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown(context.Background())
		e := srv.Engine()
		client := e.NewSession(gearman.SessionInfo{FD: -1}, discardOutput{})
		worker := e.NewSession(gearman.SessionInfo{FD: -1}, discardOutput{})
		defer client.Close()
		defer worker.Close()
		pkt := func(ty codec.Type, args ...[]byte) *codec.Packet {
			return &codec.Packet{Magic: codec.Req, Type: ty, Args: args}
		}
		fn := []byte("resize")
		if err := worker.Handle(pkt(codec.CanDo, fn)); err != nil {
			t.Fatal(err)
		}
		submit := pkt(codec.SubmitJobBg, fn, nil, []byte("data"))
		grab := pkt(codec.GrabJob)
		handle := append(make([]byte, 0, 32), "H:t:"...)
		done := pkt(codec.WorkComplete, handle, nil)
		id := 0
		run := func() {
			id++
			client.Handle(submit)
			worker.Handle(grab)
			// The handle counter is the job number; write it in place.
			done.Args[0] = strconv.AppendInt(handle[:4], int64(id), 10)
			worker.Handle(done)
			if o := worker.Outcome(); o != gearman.OutcomeOK {
				t.Fatalf("WORK_COMPLETE outcome %v", o)
			}
		}
		for range 10 {
			run() // warm the job free list and admit the name
		}
		return testing.AllocsPerRun(200, run)
	}
	without, with := cycle(false), cycle(true)
	if with != 0 || without != 0 {
		t.Errorf("allocs per submit/grab/complete: %v with metrics, %v without; want 0", with, without)
	}
}
