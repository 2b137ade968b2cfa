package tracing

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil/cputime"
)

// discardSink takes encoded batches and drops them.
type discardSink struct{}

func (discardSink) upload(context.Context, []byte, int) error { return nil }
func (discardSink) stop(context.Context) error                { return nil }

// BenchmarkAssignment measures what the proxy's hooks spend on a traced
// job's spans on the data path: the send span, then the delivery as two
// calls (Receive, then StartProcess) or one (Deliver), then the outcome;
// the export goroutine encodes and drops the spans (no network), so the
// figures are steadier than the server benchmarks'. The queue is flushed
// every 128 jobs, inside the measurement.
func BenchmarkAssignment(b *testing.B) {
	for _, how := range []string{"receive+startprocess", "deliver"} {
		b.Run(how, func(b *testing.B) {
			tr, pipe := benchLeanTracer(b)
			ctx := context.Background()
			b.ReportAllocs()
			start := cputime.Process()
			b.ResetTimer()
			for i := range b.N {
				s := tr.StartSendBare(ctx, time.Time{})
				s.Describe(Message{Operation: "SUBMIT_JOB", Destination: "resize", BodySize: 100})
				cr := s.Creation()
				s.Created("H:bench:1")
				m := Message{Operation: "JOB_ASSIGN", Destination: "resize", ID: "H:bench:1", BodySize: 100, Attempt: 1}
				var p Process
				if how == "deliver" {
					p = tr.Deliver(cr, m)
				} else {
					tr.Receive(ctx, cr, m)
					_, p = tr.StartProcess(ctx, cr, m)
				}
				p.Complete()
				if i%128 == 127 {
					if err := pipe.forceFlush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			_ = pipe.forceFlush(ctx)
			b.StopTimer()
			b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
			if d := pipe.dropped.Load(); d > 0 {
				b.Fatalf("%d spans dropped", d)
			}
		})
	}
}
