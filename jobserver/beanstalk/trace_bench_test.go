package beanstalk

import (
	"strconv"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
)

// BenchmarkTracedCycle is BenchmarkPutReserveDelete with and without a
// creation context on every put, behind a backlog of queued jobs (0 or
// 10 000, as many traced as the cycled ones), and with the reservation's
// trace read as the proxy's hook reads it: what the engine adds to a
// traced Beanstalk job. traced+clock has a trace hook that is a
// TraceClock, as the proxy's is, reading the monotonic clock as the
// tracer's lean clock does, and reads it before each put as the proxy does
// for its send span: the engine reads it again for the ready time.
// traced+at gives the engine that reading (SetCreationAt), as the proxy
// now does.
func BenchmarkTracedCycle(b *testing.B) {
	for _, name := range []string{"untraced", "traced", "traced+clock", "traced+at"} {
		for _, backlog := range []int{0, 10000} {
			b.Run(name+"/backlog="+strconv.Itoa(backlog), func(b *testing.B) {
				benchTracedCycle(b, name != "untraced", name == "traced+clock" || name == "traced+at", name == "traced+at", backlog)
			})
		}
	}
}

// monoHook is a trace hook whose clock is a wall base plus monotonic time.
type monoHook struct {
	traceEvents
	base time.Time
	wall int64
}

func (h *monoHook) TraceNow() int64 { return h.wall + int64(time.Since(h.base)) }

func benchTracedCycle(b *testing.B, traced, withClock, withAt bool, backlog int) {
	e := mustNew(Config{Clock: clock.Real{}, System: &testSystem})
	defer e.Close()
	var h *monoHook
	if withClock {
		now := time.Now()
		h = &monoHook{base: now, wall: now.UnixNano()}
		e.SetTraceHook(h)
	}
	s := e.NewSession(nil)
	defer s.Close()
	c := testCreation(7)
	put := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: make([]byte, 100)}
	res := wire.Command{Verb: wire.Reserve}
	var r wire.Reply
	for range backlog {
		if traced {
			s.SetCreation(c)
		}
		s.Exec(&put, &r)
	}
	b.ReportAllocs()
	for b.Loop() {
		switch {
		case withAt:
			s.SetCreationAt(c, h.TraceNow())
		case withClock:
			_ = h.TraceNow() // the proxy's reading for the send span
			s.SetCreation(c)
		case traced:
			s.SetCreation(c)
		}
		s.Exec(&put, &r)
		s.Exec(&res, &r)
		if traced {
			if _, ok := s.ReservedTrace(r.ID); !ok {
				b.Fatal("no trace")
			}
		}
		del := wire.Command{Verb: wire.Delete, ID: r.ID}
		s.Exec(&del, &r)
	}
}
