package proxy_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/tracing"
)

// discardExporter accepts and drops every span: the export side of a
// benchmark costs what serialising nothing costs, so what is measured is
// jobgate's span work and the SDK's batch processor.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// benchProvider returns a Provider with tracing on (the sampler given,
// the real batch processor) exporting to discardExporter, shut down with
// the benchmark; or nil for no sampler (tracing off).
func benchProvider(b *testing.B, sampler string) *tracing.Provider {
	if sampler == "" {
		return nil
	}
	p, err := tracing.New(context.Background(),
		tracing.Config{Enabled: true, Sampler: sampler, ServiceName: "bench"},
		tracing.WithExporter(discardExporter{}))
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

// reportCPU starts counting the process's CPU time (user and system,
// every thread: server, client and the trace SDK); the returned function
// reports it per operation as cpu-ns/op. On a shared machine, wall time per
// job mostly measures the other tenants; CPU time per job is what tracing
// adds, and what limits throughput when the server is saturated.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBeanstalkServerCycleTracing is BenchmarkBeanstalkServerCycle
// with tracing off, on but sampling nothing (always_off) and at always_on:
// each sampled cycle makes a send, a receive and a process span.
func BenchmarkBeanstalkServerCycleTracing(b *testing.B) {
	for _, sampler := range []string{"", tracing.SamplerAlwaysOff, tracing.SamplerAlwaysOn} {
		name := sampler
		if name == "" {
			name = "off"
		}
		b.Run(name, func(b *testing.B) {
			var tr *tracing.Tracer
			if p := benchProvider(b, sampler); p != nil {
				tr = p.Tracer(tracing.Beanstalk)
			}
			addr, _ := startBeanstalkTraced(b, tr, engine.Config{})
			defer reportCPU(b)()
			bsBenchCycle(b, addr)
		})
	}
}
