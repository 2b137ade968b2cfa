package proxy

import (
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
)

// Gateway tests where an upstream is slow, dies, or comes back.

// fakeGearmand is a scripted upstream: it answers every SUBMIT_* with
// JOB_CREATED after delay and GRAB_JOB with NO_JOB, except that it closes
// the connection when it gets a packet of type die.
func fakeGearmand(t testing.TB, delay time.Duration, die codec.Type) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := codec.NewReader(nc, codec.Limits{})
				for n := 1; ; n++ {
					f, err := r.ReadFrame()
					if err != nil {
						return
					}
					if f.Packet.Type == die {
						return
					}
					switch f.Packet.Type {
					case codec.GrabJob:
						nc.Write(codec.AppendPacket(nil, codec.Res, codec.NoJob))
					case codec.SubmitJob, codec.SubmitJobBg:
						time.Sleep(delay)
						nc.Write(codec.AppendPacket(nil, codec.Res, codec.JobCreated, []byte("H:fake:"+strconv.Itoa(n))))
					case codec.EchoReq:
						nc.Write(codec.AppendPacket(nil, codec.Res, codec.EchoRes, f.Packet.Data()))
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

func TestGearmanGatewayReplyOrder(t *testing.T) {
	st := startGatewaySetup(t, []string{fakeGearmand(t, 200*time.Millisecond, 0)}, config.Breaker{})
	c := dialGW(t, st.addr)
	// The slow upstream's answer comes last, but goes out first.
	var batch []byte
	batch = append(batch, pkt(codec.SubmitJobBg, "slow", "", "a")...)
	batch = append(batch, pkt(codec.EchoReq, "between")...)
	batch = append(batch, pkt(codec.SubmitJobBg, "local.fast", "", "b")...)
	c.write(batch)
	if p := c.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "@1:H:fake:") {
		t.Fatalf("first reply %v", p.String())
	}
	if p := c.expect(codec.EchoRes); string(p.Args[0]) != "between" {
		t.Fatalf("second reply %v", p.String())
	}
	if p := c.expect(codec.JobCreated); !strings.HasPrefix(string(p.Args[0]), "H:jobgate:") {
		t.Fatalf("third reply %v", p.String())
	}
}

func TestGearmanGatewayUpstreamDiesMidSubmit(t *testing.T) {
	st := startGatewaySetup(t, []string{fakeGearmand(t, 0, codec.SubmitJob)}, config.Breaker{})
	c := dialGW(t, st.addr)
	c.write(append(pkt(codec.SubmitJob, "doomed", "", "x"), pkt(codec.SubmitJob, "local.ok", "", "y")...))
	p := c.expect(codec.Error)
	if string(p.Args[0]) != string(codec.CodeQueueError) || !strings.Contains(string(p.Args[1]), "backend g1") {
		t.Fatalf("got %v", p.String())
	}
	c.expect(codec.JobCreated)
	c.quiet()
}

// ownGearmand runs gearmand on port and returns its process, for tests
// that kill and restart it by PID.
func ownGearmand(t testing.TB, port int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testutil.RequireBinary(t, "gearmand"), "--listen=127.0.0.1",
		"--port="+strconv.Itoa(port), "--threads=0", "--log-file=none")
	cmd.SysProcAttr = testutil.ChildAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if nc, err := net.Dial("tcp", addr); err == nil {
			nc.Close()
			if err := testutil.CheckListener(port, cmd.Process.Pid); err != nil {
				t.Fatalf("gearmand on %s: %v", addr, err)
			}
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("gearmand on %s did not start", addr)
		}
	}
}

func TestGearmanGatewayBreakerFailover(t *testing.T) {
	port := testutil.FreePort(t)
	a := ownGearmand(t, port)
	st := startGatewaySetup(t, []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), testutil.StartGearmand(t)},
		config.Breaker{Failures: 2, OpenTimeout: 500 * time.Millisecond, HalfOpenRequests: 1})
	fn := st.fnOwnedBy(t, "f", 1)
	c := dialGW(t, st.addr)
	submit := func() codec.Packet {
		c.send(codec.SubmitJobBg, fn, "", "x")
		p := c.next()
		if p.Type != codec.JobCreated && p.Type != codec.Error {
			t.Fatalf("submit: %v", p.String())
		}
		return p
	}
	if p := submit(); !strings.HasPrefix(string(p.Arg(0)), "@1:") {
		t.Fatalf("before the kill: %v", p.String())
	}
	_ = a.Process.Kill() // by PID
	_ = a.Wait()
	// The session to the dead server fails (an ERROR at most, never a
	// hang); submits then fail over to the next backend in hash order, and
	// the failures open the breaker.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := submit()
		if p.Type == codec.JobCreated && strings.HasPrefix(string(p.Args[0]), "@2:") &&
			st.byID[1].Breaker.State() == routing.BreakerOpen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover with an open breaker: last reply %v, breaker %v", p.String(), st.byID[1].Breaker.State())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The connection's other backends still work.
	c.send(codec.SubmitJobBg, "local.x", "", "y")
	c.expect(codec.JobCreated)
	if got := st.upstreamStatus(t, 2, fn); !strings.HasPrefix(got, fn+"\t") {
		t.Fatalf("the failed-over job is not on backend 2: %q", got)
	}
	// A gearmand on the same port again: the half-open breaker lets a
	// session through, it works, the breaker closes and the owner is used.
	ownGearmand(t, port)
	deadline = time.Now().Add(10 * time.Second)
	for {
		p := submit()
		if p.Type == codec.JobCreated && strings.HasPrefix(string(p.Args[0]), "@1:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the owner was not used again: last reply %v", p.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := st.byID[1].Breaker.State(); s != routing.BreakerClosed {
		t.Fatalf("breaker %v after recovery", s)
	}
}

func TestGearmanGatewayGrabSurvivesDyingUpstream(t *testing.T) {
	st := startGatewaySetup(t, []string{fakeGearmand(t, 0, codec.GrabJob), testutil.StartGearmand(t)}, config.Breaker{})
	fn := st.fnOwnedBy(t, "f", 2)
	c := dialGW(t, st.addr)
	c.send(codec.SubmitJobBg, fn, "", "x")
	c.expect(codec.JobCreated)
	w := dialGW(t, st.addr)
	w.send(codec.CanDo, fn)
	// Whichever backend the GRAB_JOB tries first, the one that dies is
	// skipped: the job comes from the other, then NO_JOB, never an error
	// or a hang.
	w.send(codec.GrabJob)
	p := w.expect(codec.JobAssign)
	w.send(codec.WorkComplete, string(p.Args[0]), "")
	for i := 0; i < 3; i++ {
		w.send(codec.GrabJob)
		w.expect(codec.NoJob)
	}
	w.quiet()
}

func TestGearmanGatewayForegroundJobFailsWithUpstream(t *testing.T) {
	port := testutil.FreePort(t)
	a := ownGearmand(t, port)
	st := startGatewaySetup(t, []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, config.Breaker{})
	c := dialGW(t, st.addr)
	c.send(codec.SubmitJob, "f", "", "x")
	h := string(c.expect(codec.JobCreated).Args[0])
	c.send(codec.SubmitJob, "local.f", "", "y")
	local := string(c.expect(codec.JobCreated).Args[0])
	_ = a.Process.Kill()
	if p := c.expect(codec.WorkFail); string(p.Args[0]) != h {
		t.Fatalf("WORK_FAIL for %q, want %q", p.Args[0], h)
	}
	// The local job is still there and still this client's.
	w := dialGW(t, st.addr)
	w.send(codec.CanDo, "local.f")
	w.send(codec.GrabJob)
	w.expect(codec.JobAssign)
	w.send(codec.WorkComplete, local, "ok")
	if p := c.expect(codec.WorkComplete); string(p.Args[0]) != local {
		t.Fatalf("got %v", p.String())
	}
}

// TestGearmanGatewaySlowClient: a client that stops reading is cut off at
// MaxOutput; the upstream reader that feeds it never blocks, so the
// worker and the other clients go on.
func TestGearmanGatewaySlowClient(t *testing.T) {
	c, err := config.Upstreams([]string{testutil.StartGearmand(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startGearmanGateway(t, c, gearman.Config{}, func(g *GearmanConfig) { g.MaxOutput = 1 << 20 })
	slow := dialGW(t, addr)
	slow.send(codec.SubmitJob, "f", "", "x")
	slow.expect(codec.JobCreated) // then it reads no more
	w := dialGW(t, addr)
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	h := string(w.expect(codec.JobAssign).Args[0])
	chunk := strings.Repeat("d", 100<<10)
	start := time.Now()
	for i := 0; i < 160; i++ { // 16 MB for a client that reads nothing, more than the socket buffers take
		w.send(codec.WorkData, h, chunk)
	}
	w.send(codec.WorkComplete, h, "")
	w.quiet()
	// Another client and the same worker are served as usual.
	d := dialGW(t, addr)
	d.send(codec.SubmitJob, "f", "", "y")
	h2 := string(d.expect(codec.JobCreated).Args[0])
	w.send(codec.GrabJob)
	if p := w.expect(codec.JobAssign); string(p.Args[0]) != h2 {
		t.Fatalf("got %v", p.String())
	}
	w.send(codec.WorkComplete, h2, "ok")
	d.expect(codec.WorkComplete)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %v", el)
	}
	// The slow client was cut off: after what the socket buffers held,
	// its connection ends.
	_ = slow.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1<<20)
	for {
		if _, err := slow.nc.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the slow client was not cut off")
			}
			break
		}
	}
}
