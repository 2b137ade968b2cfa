package tracing

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// stepsNow is the proxy hooks' clock reading.
func stepsNow(tr *Tracer) time.Time { return tr.Now() }

// BenchmarkJobSteps times only what an event loop does for one traced
// Gearman foreground job, in the order the proxy's hooks do it (submit:
// clock, StartSendBare, Describe, CreatedNum; grab: clock, Deliver;
// WORK_DATA; WORK_COMPLETE), on one goroutine, encoding of each span as
// it ends included. The export (sealed batches to a discarding sink) runs
// every 128 jobs with the timer stopped, so ns/op is the loop's share
// alone, without the other CPU's work that the whole-binary figures mix
// in.
func BenchmarkJobSteps(b *testing.B) {
	tr, pipe := benchLeanTracer(b)
	ctx := context.Background()
	fn := []byte("resize")
	var names stepsNames
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s := tr.StartSendBare(ctx, stepsNow(tr))
		if s.Recording() {
			s.Describe(Message{Operation: "SUBMIT_JOB", Destination: names.String(fn), BodySize: 100})
		}
		cr := s.Creation()
		s.CreatedNum("H:bench:", uint64(i+1))
		m := Message{Operation: "JOB_ASSIGN", Destination: "resize", IDPrefix: "H:bench:", IDNum: uint64(i + 1),
			BodySize: 100, Attempt: 1, Enqueued: time.Unix(0, 1), Start: stepsNow(tr)}
		p := tr.Deliver(cr, m)
		p.Data(10)
		p.Complete()
		if i%128 == 127 {
			b.StopTimer()
			if err := pipe.forceFlush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	_ = pipe.forceFlush(ctx)
	if d := pipe.dropped.Load(); d > 0 {
		b.Fatalf("%d spans dropped", d)
	}
}

// stepsNames is the proxy's function-name cache.
type stepsNames struct{ Names }

// benchLeanTracer returns an always_on Gearman tracer on the lean path
// whose export encodes every batch and discards it, and its pipe; the
// pipe shuts down when the benchmark ends.
func benchLeanTracer(b *testing.B) (*Tracer, *leanPipe) {
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("bench"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res))
	rc, _ := Config{Sampler: SamplerAlwaysOn}.resolve(func(string) (string, bool) { return "", false })
	pipe := newLeanPipe(tp, newLeanEncoder(res, leanScope), discardSink{}, 4096, false)
	b.Cleanup(func() { pipe.shutdown(context.Background()) })
	tr := NewTracer(tp, Gearman, rc)
	tr.lean = &leanTracer{system: string(Gearman), sampler: newLeanSampler(rc), pipe: pipe}
	return tr, pipe
}
