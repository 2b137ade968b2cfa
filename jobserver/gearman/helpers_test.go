package gearman

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
)

// recorder is an Output that keeps what it is sent, as strings like
// "JOB_CREATED H:t:1" (arguments joined by spaces) or "TEXT ...".
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) WritePacket(p *codec.Packet) {
	if p.Magic != codec.Res {
		panic("engine emitted a non-response packet")
	}
	var b strings.Builder
	b.WriteString(p.Type.String())
	for _, a := range p.Args {
		b.WriteByte(' ')
		b.Write(a)
	}
	r.mu.Lock()
	r.got = append(r.got, b.String())
	r.mu.Unlock()
}

func (r *recorder) WriteText(t []byte) {
	r.mu.Lock()
	r.got = append(r.got, "TEXT "+string(t))
	r.mu.Unlock()
}

// take returns and forgets what was recorded.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.got
	r.got = nil
	return g
}

// harness is an engine on a fake clock with helpers to open sessions.
type harness struct {
	t   *testing.T
	e   *Engine
	clk *clock.Fake
	fd  int
}

var epoch0 = time.Date(2026, 3, 2, 10, 0, 30, 0, time.UTC) // a Monday

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	clk, ok := cfg.Clock.(*clock.Fake)
	if !ok {
		clk = clock.NewFake(epoch0)
	}
	cfg.Clock = clk
	if cfg.HandlePrefix == "" {
		cfg.HandlePrefix = "H:t"
	}
	if cfg.PID == 0 {
		cfg.PID = 4242
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	t.Cleanup(func() { checkInvariants(t, e) })
	return &harness{t: t, e: e, clk: clk}
}

// conn is one test session and what it received.
type conn struct {
	h   *harness
	s   *Session
	rec *recorder
}

func (h *harness) open() *conn {
	h.fd++
	rec := &recorder{}
	return &conn{h: h, rec: rec, s: h.e.NewSession(SessionInfo{FD: h.fd, Host: "127.0.0.1"}, rec)}
}

// send handles a request packet built from args.
func (c *conn) send(t codec.Type, args ...string) {
	c.h.t.Helper()
	p := codec.Packet{Magic: codec.Req, Type: t}
	for _, a := range args {
		p.Args = append(p.Args, []byte(a))
	}
	if err := c.s.Handle(&p); err != nil {
		c.h.t.Fatalf("Handle(%v): %v", p.Type, err)
	}
}

// admin runs an admin line and returns the reply.
func (c *conn) admin(line string) string {
	c.h.t.Helper()
	if err := c.s.HandleText([]byte(line)); err != nil {
		c.h.t.Fatalf("HandleText(%q): %v", line, err)
	}
	got := c.rec.take()
	if len(got) != 1 || !strings.HasPrefix(got[0], "TEXT ") {
		c.h.t.Fatalf("admin %q: got %q", line, got)
	}
	return strings.TrimPrefix(got[0], "TEXT ")
}

// expect checks that exactly want was received since the last check.
func (c *conn) expect(want ...string) {
	c.h.t.Helper()
	got := c.rec.take()
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
		c.h.t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// await waits until n things were received since the last check, and
// returns them: with a journal, replies come from the completer goroutine.
func (c *conn) await(n int) []string {
	c.h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.rec.mu.Lock()
		k := len(c.rec.got)
		c.rec.mu.Unlock()
		if k >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	got := c.rec.take()
	if len(got) != n {
		c.h.t.Fatalf("waited for %d packets, got %q", n, got)
	}
	return got
}

// submit sends a submit request and returns the handle from JOB_CREATED.
func (c *conn) submit(t codec.Type, args ...string) string {
	c.h.t.Helper()
	c.send(t, args...)
	got := c.await(1)
	if len(got) != 1 || !strings.HasPrefix(got[0], "JOB_CREATED ") {
		c.h.t.Fatalf("submit: got %q", got)
	}
	return strings.TrimPrefix(got[0], "JOB_CREATED ")
}

func (c *conn) close() { c.s.Close() }

// checkInvariants verifies the engine's counters against its lists.
func checkInvariants(t *testing.T, e *Engine) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	total, pending := 0, 0
	for j := e.pendingJobs.head; j != nil; j = j.next {
		if j.state != statePending {
			t.Errorf("job %d on the pending list in state %d", j.id, j.state)
		}
		pending++
	}
	for _, f := range e.funcList {
		pending -= f.pending
		sleepers := 0
		for _, w := range f.workers {
			if w.wakeable() {
				sleepers++
			}
		}
		if sleepers != f.sleepers {
			t.Errorf("function %s: sleepers %d, counted %d", f.name, f.sleepers, sleepers)
		}
		for p := 0; p < numPrio; p++ {
			n := 0
			for j := f.queue[p].head; j != nil; j = j.next {
				if j.state != stateQueued || j.fn != f || int(j.prio) != p {
					t.Errorf("function %s: job %d misfiled", f.name, j.id)
				}
				n++
			}
			if n != f.queued[p] {
				t.Errorf("function %s prio %d: queued %d, listed %d", f.name, p, f.queued[p], n)
			}
		}
		total += f.total()
	}
	if pending != 0 {
		t.Errorf("pending list and function counts differ by %d", pending)
	}
	running := 0
	for s := e.sessions; s != nil; s = s.nextS {
		n := 0
		var prev *job
		for j := s.running.head; j != nil; j = j.next {
			if j.state != stateRunning || j.worker != s || j.prev != prev {
				t.Errorf("job %d misfiled on a worker's running list", j.id)
			}
			prev = j
			n++
		}
		if prev != s.running.tail || n != s.nrunning {
			t.Errorf("worker holds %d jobs, counts %d (tail ok: %v)", n, s.nrunning, prev == s.running.tail)
		}
		running += n
	}
	for _, f := range e.funcList {
		running -= f.running
	}
	if running != 0 {
		t.Errorf("running lists and function counts differ by %d", running)
	}
	if total != len(e.jobs) {
		t.Errorf("functions count %d jobs, index has %d", total, len(e.jobs))
	}
	for i, j := range e.heap {
		if int(j.tidx) != i {
			t.Errorf("heap index of job %d is %d, at %d", j.id, j.tidx, i)
		}
	}
}
