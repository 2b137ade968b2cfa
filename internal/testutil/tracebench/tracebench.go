// Package tracebench holds what the tracing benchmarks of both protocols
// share: a trace provider exporting to a discarding OTLP receiver, and a
// CPU-time-per-operation metric.
package tracebench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/jobgate/jobgate/internal/testutil/cputime"
	"github.com/jobgate/jobgate/tracing"
)

// Provider returns a tracing.Provider with tracing on (the sampler given,
// the real export queue) exporting over OTLP/HTTP to a receiver on
// loopback that discards every request, shut down with the benchmark; or
// nil for no sampler (tracing off). The export is part of what a traced
// server pays, so it is part of the benchmark.
func Provider(b *testing.B, sampler string) *tracing.Provider {
	if sampler == "" {
		return nil
	}
	p, err := tracing.New(context.Background(),
		tracing.Config{Enabled: true, Sampler: sampler, ServiceName: "bench", Endpoint: receiver(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
		if d := p.Dropped(); d > 0 {
			b.Logf("%d spans dropped", d)
		}
	})
	return p
}

// ReportCPU starts counting the process's CPU time (user and system,
// every thread: server, client and the trace SDK); the returned function
// reports it per operation as cpu-ns/op. On a shared machine, wall time per
// job mostly measures the other tenants; CPU time per job is what tracing
// adds, and what limits throughput when the server is saturated.
func ReportCPU(b *testing.B) func() {
	start := cputime.Process()
	return func() {
		b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
	}
}

// receiver starts an OTLP/HTTP receiver on loopback that reads and
// discards every request, for the duration of the benchmark, and returns
// its URL.
func receiver(b *testing.B) string {
	resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}
