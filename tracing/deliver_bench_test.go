package tracing

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
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
			res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("bench"))
			tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res))
			rc, _ := Config{Sampler: SamplerAlwaysOn}.resolve(func(string) (string, bool) { return "", false })
			pipe := newLeanPipe(tp, newLeanEncoder(res, leanScope), discardSink{}, 4096, false)
			defer pipe.shutdown(context.Background())
			tr := NewTracer(tp, Gearman, rc)
			tr.lean = &leanTracer{system: string(Gearman), sampler: newLeanSampler(rc), pipe: pipe}
			ctx := context.Background()
			b.ReportAllocs()
			start := cpuTime()
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
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
			if d := pipe.dropped.Load(); d > 0 {
				b.Fatalf("%d spans dropped", d)
			}
		})
	}
}
