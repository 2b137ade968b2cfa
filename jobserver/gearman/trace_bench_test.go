package gearman

import (
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// countingClock is a TraceHook and TraceClock whose clock costs nothing,
// so that the benchmark measures the engine's own bookkeeping.
type countingClock struct{ now int64 }

func (c *countingClock) JobReturned(uint64, ReturnReason) {}
func (c *countingClock) TraceNow() int64                  { c.now++; return c.now }

// BenchmarkEngineForegroundTraced is BenchmarkEngineForeground with every
// job traced, and what the proxy asks the engine for a traced job: the
// trace of the job a grab assigned.
func BenchmarkEngineForegroundTraced(b *testing.B) { benchForeground(b, true) }

// monoClock is a TraceHook whose clock is a wall base plus monotonic
// time, as the tracer's lean clock reads it.
type monoClock struct {
	base time.Time
	wall int64
}

func (c *monoClock) JobReturned(uint64, ReturnReason) {}
func (c *monoClock) TraceNow() int64                  { return c.wall + int64(time.Since(c.base)) }

// BenchmarkEngineForegroundTraceClock is BenchmarkEngineForegroundTraced
// with a real clock, read before each submit as the proxy reads it for
// the send span. clock: the engine reads it again for the job's ready
// time; at: the proxy hands its reading over (SetCreationAt), as it does.
func BenchmarkEngineForegroundTraceClock(b *testing.B) {
	for _, at := range []bool{false, true} {
		name := "clock"
		if at {
			name = "at"
		}
		b.Run(name, func(b *testing.B) {
			now := time.Now()
			clk := &monoClock{base: now, wall: now.UnixNano()}
			e, _ := New(Config{HandlePrefix: "H:bench"})
			defer e.Stop()
			e.SetTraceHook(clk)
			cout, wout := &discard{}, &discard{}
			c := e.NewSession(SessionInfo{}, cout)
			w := e.NewSession(SessionInfo{}, wout)
			fn, body, result := []byte("f"), make([]byte, 100), []byte("ok")
			w.Handle(req(codec.CanDo, fn))
			submit := req(codec.SubmitJob, fn, nil, body)
			grab := req(codec.GrabJob)
			complete := req(codec.WorkComplete, nil, result)
			cr := testCreation(9)
			b.ReportAllocs()
			for b.Loop() {
				start := clk.TraceNow() // the proxy's reading for the send span
				if at {
					c.SetCreationAt(cr, start)
				} else {
					c.SetCreation(cr)
				}
				c.Handle(submit)
				w.Handle(grab)
				if jt, ok := w.LastJobTrace(); !ok || jt.Attempt != 1 {
					b.Fatal("no trace")
				}
				complete.Args[0] = wout.handle
				w.Handle(complete)
			}
		})
	}
}
