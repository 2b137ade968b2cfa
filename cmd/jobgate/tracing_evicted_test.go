package main

import (
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/tracing"
)

// TestEvictedMetricSumsGateways: the Gearman and Beanstalk gateways of one
// registry share jobgate_trace_table_evicted_total, which adds them up;
// without a tracer nothing is registered.
func TestEvictedMetricSumsGateways(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	tr := tracing.NewTracer(noop.NewTracerProvider(), tracing.Gearman, tracing.Config{})
	registerEvictedMetric(m, nil, func() uint64 { return 100 })
	registerEvictedMetric(m, tr, func() uint64 { return 2 })
	registerEvictedMetric(m, tr, func() uint64 { return 3 })
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "jobgate_trace_table_evicted_total" {
			if got := mf.GetMetric()[0].GetCounter().GetValue(); got != 5 {
				t.Fatalf("evicted = %v, want 5", got)
			}
			return
		}
	}
	t.Fatal("jobgate_trace_table_evicted_total not registered")
}
