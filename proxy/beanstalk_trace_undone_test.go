package proxy

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/tracing"
)

// undoneRig is a traced engine on a fake clock with its beanstalkTrace, to
// drive connections' hooks in an order of the test's choosing: the
// interleavings of the engine's moves (under its lock) with a
// connection's reserved (after the reply) that a real server makes only
// rarely.
type undoneRig struct {
	t   *testing.T
	e   *engine.Engine
	fc  *clock.Fake
	bt  *beanstalkTrace
	rec *tracetest.SpanRecorder
}

func newUndoneRig(t *testing.T) *undoneRig {
	fc := clock.NewFake(time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC))
	e, err := engine.New(engine.Config{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rec := tracetest.NewSpanRecorder()
	s := &BeanstalkServer{eng: e}
	s.wireTracing(tracing.NewSyncTracer(tracing.Beanstalk, tracing.Config{}, rec))
	return &undoneRig{t: t, e: e, fc: fc, bt: s.trace, rec: rec}
}

// rigConn is one connection: its session and tracing state.
type rigConn struct {
	s  *engine.Session
	ct beanstalkConnTrace
}

func (g *undoneRig) conn() *rigConn {
	c := &rigConn{s: g.e.NewSession(nil)}
	g.t.Cleanup(c.s.Close)
	return c
}

// exec runs cmd on c with the tracing hooks around it, as the serve loop
// does; with late, reserved's hook is left for finish.
func (g *undoneRig) exec(c *rigConn, cmd wire.Command, want wire.ReplyKind) (*wire.Command, *wire.Reply) {
	g.t.Helper()
	var r wire.Reply
	g.bt.before(&c.ct, c.s, &cmd)
	if !c.s.Exec(&cmd, &r) || r.Kind != want {
		g.t.Fatalf("%s: %v, want %v", cmd.Verb, r.Kind, want)
	}
	return &cmd, &r
}

func (g *undoneRig) do(c *rigConn, cmd wire.Command, want wire.ReplyKind) *wire.Reply {
	g.t.Helper()
	pc, r := g.exec(c, cmd, want)
	g.bt.after(&c.ct, pc, r)
	return r
}

// outcomes returns the recorded process spans' outcomes, sorted, and
// checks that the hook keeps no open span.
func (g *undoneRig) outcomes() string {
	g.t.Helper()
	g.bt.mu.Lock()
	open, ending := len(g.bt.open), len(g.bt.ending)
	g.bt.mu.Unlock()
	if open != 0 || ending != 0 {
		g.t.Errorf("%d process spans open, %d ending, want none", open, ending)
	}
	var out []string
	for _, s := range g.rec.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == tracing.AttrOutcome {
				out = append(out, fmt.Sprintf("%s/%v", a.Value.AsString(), s.Status().Code))
			}
		}
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// TestBeanstalkTraceUndoneBeforeReserved forces the stale span's race:
// connection A reserves a traced job, and before A's reserved hook runs,
// the job's TTR runs out and connection B reserves and deletes it. A's
// span must end (TTR expired) and not stay in bt.open for ever.
func TestBeanstalkTraceUndoneBeforeReserved(t *testing.T) {
	g := newUndoneRig(t)
	p, a, b := g.conn(), g.conn(), g.conn()
	id := g.do(p, wire.Command{Verb: wire.Put, Pri: 1, TTR: 1, Body: []byte("x")}, wire.Inserted).ID
	rcmd, rA := g.exec(a, wire.Command{Verb: wire.Reserve}, wire.Reserved)
	g.fc.Advance(2 * time.Second) // A's TTR runs out: no span open yet
	g.do(b, wire.Command{Verb: wire.ReserveJob, ID: id}, wire.Reserved)
	g.do(b, wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
	g.bt.after(&a.ct, rcmd, rA) // A's hook, late
	if got, want := g.outcomes(), "[completed/Unset ttr_expired/Error]"; got != want {
		t.Fatalf("process outcomes %s, want %s", got, want)
	}
	if n := len(g.rec.Ended()); n != 5 {
		t.Fatalf("%d spans, want 5 (send, 2 receive, 2 process)", n)
	}
}

// TestBeanstalkTraceUndoneTwice: both A's reservation (TTR) and B's
// (session closed) are undone before either connection's hook runs, C
// reserves the job, and the late hooks run in either order, before and
// after C's delete. Every span ends once, with its own outcome.
func TestBeanstalkTraceUndoneTwice(t *testing.T) {
	for _, order := range []string{"ab", "ba", "deleted-ab", "deleted-ba"} {
		t.Run(order, func(t *testing.T) {
			g := newUndoneRig(t)
			p, a, b, c := g.conn(), g.conn(), g.conn(), g.conn()
			id := g.do(p, wire.Command{Verb: wire.Put, Pri: 1, TTR: 1, Body: []byte("x")}, wire.Inserted).ID
			cmdA, rA := g.exec(a, wire.Command{Verb: wire.Reserve}, wire.Reserved)
			g.fc.Advance(2 * time.Second)
			cmdB, rB := g.exec(b, wire.Command{Verb: wire.ReserveJob, ID: id}, wire.Reserved)
			b.s.Close()
			g.do(c, wire.Command{Verb: wire.ReserveJob, ID: id}, wire.Reserved)
			if strings.HasPrefix(order, "deleted") {
				g.do(c, wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
			}
			if strings.HasSuffix(order, "ba") {
				g.bt.after(&b.ct, cmdB, rB)
				g.bt.after(&a.ct, cmdA, rA)
			} else {
				g.bt.after(&a.ct, cmdA, rA)
				g.bt.after(&b.ct, cmdB, rB)
			}
			if !strings.HasPrefix(order, "deleted") {
				g.do(c, wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
			}
			if got, want := g.outcomes(), "[completed/Unset failed/Error ttr_expired/Error]"; got != want {
				t.Fatalf("process outcomes %s, want %s", got, want)
			}
			if n := len(g.rec.Ended()); n != 7 {
				t.Fatalf("%d spans, want 7 (send, 3 receive, 3 process)", n)
			}
		})
	}
}

// TestBeanstalkTraceUndoneAfterReserved: the usual order, the hook
// after the span opened, still ends it at the TTR expiry, once.
func TestBeanstalkTraceUndoneAfterReserved(t *testing.T) {
	g := newUndoneRig(t)
	p, a := g.conn(), g.conn()
	g.do(p, wire.Command{Verb: wire.Put, Pri: 1, TTR: 1, Body: []byte("x")}, wire.Inserted)
	g.do(a, wire.Command{Verb: wire.Reserve}, wire.Reserved)
	g.fc.Advance(2 * time.Second)
	if got, want := g.outcomes(), "[ttr_expired/Error]"; got != want {
		t.Fatalf("process outcomes %s, want %s", got, want)
	}
}

// TestBeanstalkTraceNowIsTracerClock: the engine's hook reads the spans'
// clock (Tracer.Now) for the ready times it keeps, so that a queue wait is
// one clock's difference, whatever the wall clock did in between.
func TestBeanstalkTraceNowIsTracerClock(t *testing.T) {
	g := newUndoneRig(t)
	var hook engine.TraceHook = g.bt
	tc, ok := hook.(engine.TraceClock)
	if !ok {
		t.Fatal("the Beanstalk trace hook is no engine.TraceClock")
	}
	before := g.bt.tr.Now().UnixNano()
	now := tc.TraceNow()
	after := g.bt.tr.Now().UnixNano()
	if now < before || now > after {
		t.Fatalf("TraceNow %d, not within the tracer's readings %d..%d", now, before, after)
	}
	// A traced job put now is ready at a reading of that clock, not at the
	// engine's fake clock's time.
	p := g.conn()
	before = g.bt.tr.Now().UnixNano()
	id := g.do(p, wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}, wire.Inserted).ID
	after = g.bt.tr.Now().UnixNano()
	jt, ok := g.e.JobTrace(id)
	if r := jt.Ready.UnixNano(); !ok || r < before || r > after {
		t.Fatalf("ready %d (%v), not within %d..%d", r, ok, before, after)
	}
}

// TestBeanstalkTraceReleasedToWaiter forces the release race: A's
// release hands the job at once to B's waiting reserve, and B's hook
// (its RESERVED) runs before A's (its RELEASED). A's span must end as
// released and B's, at B's delete, as completed: not A's as a lost
// worker and B's as released.
func TestBeanstalkTraceReleasedToWaiter(t *testing.T) {
	g := newUndoneRig(t)
	p, a, b := g.conn(), g.conn(), g.conn()
	id := g.do(p, wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}, wire.Inserted).ID
	g.do(a, wire.Command{Verb: wire.Reserve}, wire.Reserved)
	cmdB := wire.Command{Verb: wire.Reserve}
	var rB wire.Reply
	g.bt.before(&b.ct, b.s, &cmdB)
	if b.s.Exec(&cmdB, &rB) {
		t.Fatalf("B's reserve answered %v at once, want it to wait", rB.Kind)
	}
	cmdA, rA := g.exec(a, wire.Command{Verb: wire.Release, ID: id, Pri: 2}, wire.Released)
	if !b.s.Result(&rB) || rB.Kind != wire.Reserved || rB.ID != id {
		t.Fatalf("B's reserve: %v %d, want RESERVED %d", rB.Kind, rB.ID, id)
	}
	g.bt.after(&b.ct, &cmdB, &rB) // B's hook first
	g.bt.after(&a.ct, cmdA, rA)
	g.do(b, wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
	if got, want := g.outcomes(), "[completed/Unset released/Unset]"; got != want {
		t.Fatalf("process outcomes %s, want %s", got, want)
	}
}

// TestBeanstalkTraceDeletedByOther: A releases the job, and another
// connection deletes it from the ready queue before A's hook runs: the
// other connection's delete takes no span (it held none), A's ends as
// released.
func TestBeanstalkTraceDeletedByOther(t *testing.T) {
	g := newUndoneRig(t)
	p, a := g.conn(), g.conn()
	id := g.do(p, wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}, wire.Inserted).ID
	g.do(a, wire.Command{Verb: wire.Reserve}, wire.Reserved)
	cmdA, rA := g.exec(a, wire.Command{Verb: wire.Release, ID: id, Pri: 2}, wire.Released)
	g.do(p, wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
	g.bt.after(&a.ct, cmdA, rA)
	if got, want := g.outcomes(), "[released/Unset]"; got != want {
		t.Fatalf("process outcomes %s, want %s", got, want)
	}
}

// TestBeanstalkTraceEndingBounded: when A's release hook comes only
// after B's span has ended (B deleted the job, or B's TTR ran out), A's
// span, waiting in bt.ending, ends as lost with B's: nothing waits on a
// connection that may never report.
func TestBeanstalkTraceEndingBounded(t *testing.T) {
	for _, bEnds := range []string{"delete", "ttr"} {
		t.Run(bEnds, func(t *testing.T) {
			g := newUndoneRig(t)
			p, a, b := g.conn(), g.conn(), g.conn()
			id := g.do(p, wire.Command{Verb: wire.Put, Pri: 1, TTR: 1, Body: []byte("x")}, wire.Inserted).ID
			g.do(a, wire.Command{Verb: wire.Reserve}, wire.Reserved)
			cmdA, rA := g.exec(a, wire.Command{Verb: wire.Release, ID: id, Pri: 2}, wire.Released)
			g.do(b, wire.Command{Verb: wire.Reserve}, wire.Reserved)
			want := "[completed/Unset failed/Error]"
			if bEnds == "delete" {
				g.do(b, wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
			} else {
				g.fc.Advance(2 * time.Second)
				want = "[failed/Error ttr_expired/Error]"
			}
			g.bt.mu.Lock()
			ending := len(g.bt.ending)
			g.bt.mu.Unlock()
			if ending != 0 {
				t.Fatalf("%d spans still ending after B's ended, want 0", ending)
			}
			g.bt.after(&a.ct, cmdA, rA) // too late: takes nothing
			if got := g.outcomes(); got != want {
				t.Fatalf("process outcomes %s, want %s", got, want)
			}
		})
	}
}

// TestBeanstalkTraceUnanswered: the loop closes a connection whose delete,
// release or bury waited for the journal (broken, cut off, at shutdown);
// its span ends, as lost, since the connection will never report the
// outcome. Before, it stayed open for ever once another connection
// deleted the job: only the reserving connection's commands end a span.
func TestBeanstalkTraceUnanswered(t *testing.T) {
	for _, verb := range []wire.Verb{wire.Delete, wire.Release, wire.Bury} {
		t.Run(verb.String(), func(t *testing.T) {
			g := newUndoneRig(t)
			p, a := g.conn(), g.conn()
			id := g.do(p, wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}, wire.Inserted).ID
			g.do(a, wire.Command{Verb: wire.Reserve}, wire.Reserved)
			want := map[wire.Verb]wire.ReplyKind{wire.Delete: wire.Deleted, wire.Release: wire.Released, wire.Bury: wire.Buried}[verb]
			cmd, _ := g.exec(a, wire.Command{Verb: verb, ID: id, Pri: 1}, want) // its reply never comes back
			g.bt.unanswered(a.s, cmd)
			a.s.Close()
			if verb != wire.Delete {
				g.do(p, wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
			}
			if got, want := g.outcomes(), "[failed/Error]"; got != want {
				t.Fatalf("process outcomes %s, want %s", got, want)
			}
		})
	}
}
