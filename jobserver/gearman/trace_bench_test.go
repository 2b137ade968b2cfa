package gearman

import (
	"testing"
	"time"
)

// countingClock is a TraceHook and TraceClock whose clock costs nothing,
// so that the benchmark measures the engine's own bookkeeping.
type countingClock struct{ now int64 }

func (c *countingClock) JobReturned(uint64, ReturnReason) {}
func (c *countingClock) TraceNow() int64                  { c.now++; return c.now }

// BenchmarkEngineForegroundTraced is BenchmarkEngineForeground with every
// job traced, and what the proxy asks the engine for a traced job: the
// trace of the job a grab assigned.
func BenchmarkEngineForegroundTraced(b *testing.B) {
	benchForeground(b, &countingClock{}, func(c *Session, cr Creation) { c.SetCreation(cr) })
}

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
	now := time.Now()
	clk := &monoClock{base: now, wall: now.UnixNano()}
	b.Run("clock", func(b *testing.B) {
		benchForeground(b, clk, func(c *Session, cr Creation) {
			_ = clk.TraceNow() // the proxy's reading for the send span
			c.SetCreation(cr)
		})
	})
	b.Run("at", func(b *testing.B) {
		benchForeground(b, clk, func(c *Session, cr Creation) { c.SetCreationAt(cr, clk.TraceNow()) })
	})
}
