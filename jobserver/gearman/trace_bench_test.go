package gearman

import (
	"testing"

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
func BenchmarkEngineForegroundTraced(b *testing.B) {
	e, _ := New(Config{HandlePrefix: "H:bench"})
	defer e.Stop()
	e.SetTraceHook(&countingClock{})
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
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.SetCreation(cr)
		c.Handle(submit)
		w.Handle(grab)
		if jt, ok := w.LastJobTrace(); !ok || jt.Attempt != 1 {
			b.Fatal("no trace")
		}
		complete.Args[0] = wout.handle
		w.Handle(complete)
	}
}
