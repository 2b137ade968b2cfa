package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/jobgate/jobgate/tracing"
)

// benchOTLPReceiver starts an OTLP/HTTP receiver on loopback that reads
// and discards every request, for the duration of the benchmark, and
// returns its URL: a traced benchmark then pays for the real export
// (encoding, HTTP) as a server does. (The external tests have their own.)
func benchOTLPReceiver(b *testing.B) string {
	resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// processCPU is the process's CPU time so far (every thread), for a
// per-job CPU figure that a loaded machine distorts less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGearmanServerForegroundTracing is the event-loop foreground
// benchmark with tracing off, on but sampling no job (always_off: the cost
// of an unsampled job), and at always_on (the real export queue, over
// OTLP/HTTP to a receiver that discards): each sampled job makes a send, a
// receive and a process span.
func BenchmarkGearmanServerForegroundTracing(b *testing.B) {
	for _, sampler := range []string{"", tracing.SamplerAlwaysOff, tracing.SamplerAlwaysOn} {
		name := sampler
		if name == "" {
			name = "off"
		}
		b.Run(name, func(b *testing.B) {
			cfg := GearmanConfig{Engine: gearmanConfigForTest()}
			if sampler != "" {
				p, err := tracing.New(context.Background(),
					tracing.Config{Enabled: true, Sampler: sampler, ServiceName: "bench", Endpoint: benchOTLPReceiver(b)})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = p.Shutdown(ctx)
				})
				cfg.Tracer = p.Tracer(tracing.Gearman)
			}
			addr := startJobgateGearmanServer(b, cfg)
			start := processCPU()
			runForegroundBench(b, addr)
			b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
