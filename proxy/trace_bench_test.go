package proxy_test

import (
	"testing"

	"github.com/jobgate/jobgate/internal/testutil/tracebench"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/tracing"
)

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
			if p := tracebench.Provider(b, sampler); p != nil {
				tr = p.Tracer(tracing.Beanstalk)
			}
			addr, _ := startBeanstalkTraced(b, tr, engine.Config{})
			defer tracebench.ReportCPU(b)()
			bsBenchCycle(b, addr)
		})
	}
}
