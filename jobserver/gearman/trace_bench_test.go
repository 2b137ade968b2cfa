package gearman

import (
	"testing"
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
