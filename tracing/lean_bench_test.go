package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/jobgate/jobgate/internal/testutil/cputime"
)

// BenchmarkJobSpans measures one traced job's three spans (send, receive,
// process, as traceJob makes them) end to end: recording, queueing,
// encoding and POSTing over OTLP/HTTP to a receiver on loopback that
// discards the body. "sdk" is the SDK path the job spans took before the
// lean path (NewTracer on the Provider's SDK tracer provider), "lean" is
// what Provider.Tracer gives now. The queue is flushed every 256 jobs so
// that nothing is dropped and the export is inside the measurement.
// cpu-ns/op is the process's CPU (every goroutine: the export and the
// receiver too) per job; allocs/op counts every goroutine's allocations.
func BenchmarkJobSpans(b *testing.B) {
	resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	defer srv.Close()
	for _, path := range []string{"sdk", "lean"} {
		b.Run(path, func(b *testing.B) {
			clearEnv(b)
			p, err := New(context.Background(), Config{Enabled: true, Endpoint: srv.URL, Sampler: SamplerAlwaysOn, QueueSize: 4096})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			tr := p.Tracer(Gearman)
			if path == "sdk" {
				tr = NewTracer(p.TracerProvider(), Gearman, p.Config())
			}
			ctx := context.Background()
			b.ReportAllocs()
			start := cputime.Process()
			b.ResetTimer()
			for i := range b.N {
				traceJob(tr)
				if i%256 == 255 {
					if err := p.ForceFlush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := p.ForceFlush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
			if d, f := p.Dropped(), p.ExportFailed(); d+f > 0 {
				b.Fatalf("%d spans dropped, %d failed", d, f)
			}
		})
	}
}
