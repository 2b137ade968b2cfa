package proxy

import (
	"testing"

	"github.com/jobgate/jobgate/internal/testutil/tracebench"
	"github.com/jobgate/jobgate/tracing"
)

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
			if p := tracebench.Provider(b, sampler); p != nil {
				cfg.Tracer = p.Tracer(tracing.Gearman)
			}
			addr := startJobgateGearmanServer(b, cfg)
			defer tracebench.ReportCPU(b)()
			runForegroundBench(b, addr)
		})
	}
}
