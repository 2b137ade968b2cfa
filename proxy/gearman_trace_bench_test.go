package proxy

import (
	"context"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jobgate/jobgate/tracing"
)

// nopExporter drops every span (see discardExporter in the external
// tests; this package's benchmarks need their own).
type nopExporter struct{}

func (nopExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (nopExporter) Shutdown(context.Context) error                             { return nil }

// processCPU is the process's CPU time so far (every thread), for a
// per-job CPU figure that a loaded machine distorts less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGearmanServerForegroundTracing is the event-loop foreground
// benchmark with tracing off, on but sampling no job (always_off: the cost
// of an unsampled job), and at always_on (the real batch processor,
// exporting to nothing): each sampled job makes a send, a receive and a
// process span.
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
					tracing.Config{Enabled: true, Sampler: sampler, ServiceName: "bench"},
					tracing.WithExporter(nopExporter{}))
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
