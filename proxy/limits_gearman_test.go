package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/metrics"
)

// forEachLimitedMode runs test against a server with limits lim and a
// fake clock, served by the event loop and by goroutines.
func forEachLimitedMode(t *testing.T, lim Limits, test func(t *testing.T, addr string, clk *clock.Fake, m *metrics.Metrics)) {
	for _, goroutines := range []bool{false, true} {
		name := "loop"
		if goroutines {
			name = "goroutines"
		}
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			ec := gearmanConfigForTest()
			ec.Clock = clk
			m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
			srv, err := NewGearmanServer(GearmanConfig{Engine: ec, Goroutines: goroutines, ConnLimits: lim, Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			test(t, serveGearman(t, srv), clk, m)
		})
	}
}

// glConn is a raw Gearman connection for the limit tests.
type glConn struct {
	nc net.Conn
	br *bufio.Reader
}

func glDial(t *testing.T, addr string) *glConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &glConn{nc, bufio.NewReader(nc)}
}

func (c *glConn) send(t *testing.T, typ codec.Type, args ...string) {
	t.Helper()
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	if _, err := c.nc.Write(codec.AppendPacket(nil, codec.Req, typ, b...)); err != nil {
		t.Fatal(err)
	}
}

func (c *glConn) expect(t *testing.T, typ codec.Type, where string) *codec.Packet {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err := readPacket(c.br)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if p.Type != typ {
		t.Fatalf("%s: got %v %q, want %v", where, p.Type, p.Args, typ)
	}
	return p
}

func (c *glConn) waitClosed(t *testing.T, what string) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	// A reset counts: the server closed with the request unread.
	if _, err := io.Copy(io.Discard, c.br); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: not closed by the server: %v", what, err)
	}
}

// TestGearmanLimitsConnectionFlood: past max_connections a client reads an
// ERROR TOO_MANY_CONNECTIONS packet, then the connection closes.
func TestGearmanLimitsConnectionFlood(t *testing.T) {
	forEachLimitedMode(t, Limits{MaxConns: 2}, func(t *testing.T, addr string, _ *clock.Fake, _ *metrics.Metrics) {
		for i := 0; i < 2; i++ {
			c := glDial(t, addr)
			c.send(t, codec.EchoReq, "hi")
			c.expect(t, codec.EchoRes, "within the limit")
		}
		for i := 0; i < 4; i++ {
			c := glDial(t, addr)
			c.send(t, codec.EchoReq, "hi")
			p := c.expect(t, codec.Error, "over the limit")
			if string(p.Args[0]) != "TOO_MANY_CONNECTIONS" {
				t.Fatalf("error code %q", p.Args[0])
			}
			c.waitClosed(t, "refused connection")
		}
	})
}

// TestGearmanLimitsIdleTimeout: past idle_timeout of the fake clock an
// idle client is closed; a worker asleep after PRE_SLEEP and a worker
// holding a job stay, and the sleeper is still woken by NOOP.
func TestGearmanLimitsIdleTimeout(t *testing.T) {
	forEachLimitedMode(t, Limits{IdleTimeout: 10 * time.Second}, func(t *testing.T, addr string, clk *clock.Fake, _ *metrics.Metrics) {
		idle := glDial(t, addr)
		idle.send(t, codec.EchoReq, "x")
		idle.expect(t, codec.EchoRes, "idle")

		client := glDial(t, addr)
		client.send(t, codec.SubmitJobBg, "held", "", "data")
		client.expect(t, codec.JobCreated, "submit")
		holder := glDial(t, addr)
		holder.send(t, codec.CanDo, "held")
		holder.send(t, codec.GrabJob)
		job := holder.expect(t, codec.JobAssign, "grab")

		sleeper := glDial(t, addr)
		sleeper.send(t, codec.CanDo, "later")
		sleeper.send(t, codec.PreSleep)
		sleeper.send(t, codec.EchoReq, "synced") // PRE_SLEEP has no reply
		sleeper.expect(t, codec.EchoRes, "sleeper")
		client.nc.Close()

		for i := 0; i < 8; i++ { // 16s in sweeps of 2.5s
			clk.Advance(2 * time.Second)
		}
		idle.waitClosed(t, "idle client")

		c := glDial(t, addr)
		c.send(t, codec.SubmitJobBg, "later", "", "data")
		c.expect(t, codec.JobCreated, "submit")
		sleeper.expect(t, codec.Noop, "sleeping worker woken")
		holder.send(t, codec.WorkComplete, string(job.Args[0]), "done")
		holder.send(t, codec.EchoReq, "alive")
		holder.expect(t, codec.EchoRes, "worker holding a job")
	})
}

// TestGearmanLimitsMaxAssigned: a worker holding max_reserved_per_conn
// jobs gets NO_JOB; once it completes one, GRAB_JOB assigns again.
func TestGearmanLimitsMaxAssigned(t *testing.T) {
	forEachLimitedMode(t, Limits{MaxReservedPerConn: 1}, func(t *testing.T, addr string, _ *clock.Fake, _ *metrics.Metrics) {
		c := glDial(t, addr)
		c.send(t, codec.SubmitJobBg, "f", "", "1")
		c.expect(t, codec.JobCreated, "submit")
		c.send(t, codec.SubmitJobBg, "f", "", "2")
		c.expect(t, codec.JobCreated, "submit")
		w := glDial(t, addr)
		w.send(t, codec.CanDo, "f")
		w.send(t, codec.GrabJob)
		job := w.expect(t, codec.JobAssign, "first grab")
		w.send(t, codec.GrabJobUniq)
		w.expect(t, codec.NoJob, "grab over the cap")
		w.send(t, codec.WorkComplete, string(job.Args[0]), "")
		w.send(t, codec.GrabJob)
		w.expect(t, codec.JobAssign, "grab after completing")
	})
}

// TestGearmanLimitsSlowReader: a client that stops reading while a worker
// streams WORK_DATA to it is cut off at write_buffer_limit, and the worker
// is not held up.
func TestGearmanLimitsSlowReader(t *testing.T) {
	forEachLimitedMode(t, Limits{WriteBufferLimit: 256 << 10}, func(t *testing.T, addr string, _ *clock.Fake, m *metrics.Metrics) {
		c := glStreamToIdleClient(t, addr, 32)
		c.waitClosed(t, "slow reader")
		if n := metricValue(t, m, `jobgate_connections_cut_total{protocol="gearman",reason="slow_reader"}`); n != 1 {
			t.Errorf("slow_reader cuts counted: %v, want 1", n)
		}
	})
}

// glStreamToIdleClient submits a job from a client that then reads
// nothing, and has a worker stream it chunks WORK_DATA packets of 1MiB,
// far more than socket buffers hold; it checks the worker is not held up
// (its ECHO answers) and returns the idle client.
func glStreamToIdleClient(t *testing.T, addr string, chunks int) *glConn {
	t.Helper()
	c := glDial(t, addr)
	c.send(t, codec.SubmitJob, "f", "", "x")
	c.expect(t, codec.JobCreated, "submit") // queued before the worker grabs
	w := glDial(t, addr)
	w.send(t, codec.CanDo, "f")
	w.send(t, codec.GrabJob)
	job := w.expect(t, codec.JobAssign, "grab")
	chunk := codec.AppendPacket(nil, codec.Req, codec.WorkData, job.Args[0], make([]byte, 1<<20))
	for i := 0; i < chunks; i++ {
		if _, err := w.nc.Write(chunk); err != nil {
			t.Fatalf("worker write %d: %v", i, err)
		}
	}
	w.send(t, codec.EchoReq, "alive")
	w.expect(t, codec.EchoRes, "worker")
	return c
}

// metricValue scrapes m for the sample named exactly key; -1 if absent.
func metricValue(t *testing.T, m *metrics.Metrics, key string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// TestGearmanLimitsReadTimeout: a packet started and never finished is cut
// off after read_timeout of the fake clock; a quiet connection is not.
func TestGearmanLimitsReadTimeout(t *testing.T) {
	forEachLimitedMode(t, Limits{ReadTimeout: 4 * time.Second}, func(t *testing.T, addr string, clk *clock.Fake, m *metrics.Metrics) {
		slow := glDial(t, addr)
		slow.send(t, codec.EchoReq, "first")
		slow.expect(t, codec.EchoRes, "first")
		partial := codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("never finished"))
		if _, err := slow.nc.Write(partial[:15]); err != nil {
			t.Fatal(err)
		}
		quiet := glDial(t, addr)
		quiet.send(t, codec.EchoReq, "x")
		quiet.expect(t, codec.EchoRes, "quiet")
		key := `jobgate_connections_cut_total{protocol="gearman",reason="read_timeout"}`
		deadline := time.Now().Add(5 * time.Second)
		for metricValue(t, m, key) < 1 {
			if time.Now().After(deadline) {
				t.Fatal("the partial packet was never cut off")
			}
			clk.Advance(time.Second) // until the server has read the partial packet
		}
		slow.waitClosed(t, "partial packet")
		quiet.send(t, codec.EchoReq, "y")
		quiet.expect(t, codec.EchoRes, "a quiet connection")
	})
}

// TestGearmanLimitsWriteTimeout: with no buffer limit, a client that stops
// reading while a worker streams WORK_DATA to it is cut off once its
// output made no progress for write_timeout.
func TestGearmanLimitsWriteTimeout(t *testing.T) {
	forEachLimitedMode(t, Limits{WriteTimeout: 4 * time.Second}, func(t *testing.T, addr string, clk *clock.Fake, m *metrics.Metrics) {
		c := glStreamToIdleClient(t, addr, 16)
		key := `jobgate_connections_cut_total{protocol="gearman",reason="write_timeout"}`
		deadline := time.Now().Add(10 * time.Second)
		for metricValue(t, m, key) < 1 {
			if time.Now().After(deadline) {
				t.Fatal("the client that does not read was never cut off")
			}
			clk.Advance(time.Second)
			time.Sleep(5 * time.Millisecond) // let the real socket writes stall between fake seconds
		}
		c.waitClosed(t, "non-reading client")
	})
}
