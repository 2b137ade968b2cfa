package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/tracing"
)

// startTracing builds the trace provider from the tracing section and the
// OTEL_* variables. With tracing off it still returns a Provider, whose
// Tracers are nil (no spans, no cost on the data path).
func startTracing(cfg *config.Config, log *slog.Logger) (*tracing.Provider, error) {
	p, err := tracing.New(context.Background(), cfg.Tracing)
	if err != nil {
		return nil, err
	}
	if rc := p.Config(); p.Enabled() {
		log.Info("tracing", "endpoint", rc.Endpoint, "protocol", rc.Protocol,
			"service", rc.ServiceName, "sampler", rc.Sampler, "ratio", rc.SampleRatio,
			"payload_traceparent", rc.PayloadTraceparent)
	}
	return p, nil
}

// tracerFor returns p's Tracer for sys; nil (tracing off) for a nil p.
func tracerFor(p *tracing.Provider, sys tracing.System) *tracing.Tracer {
	if p == nil {
		return nil
	}
	return p.Tracer(sys)
}

// registerTracingMetrics exports the spans the provider lost: dropped
// because the export queue was full, and failed exports. Scraping reads
// two atomics; nothing is counted on the data path.
func registerTracingMetrics(m *metrics.Metrics, p *tracing.Provider) {
	if m == nil || p == nil || !p.Enabled() {
		return
	}
	m.Registry().MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "jobgate_trace_spans_dropped_total",
			Help: "Finished spans discarded because the export queue was full (collector slow or unreachable).",
		}, func() float64 { return float64(p.Dropped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "jobgate_trace_spans_export_failed_total",
			Help: "Spans lost because their export failed after the exporter's retries.",
		}, func() float64 { return float64(p.ExportFailed()) }),
	)
}

// evictedSources are the gateways whose trace-table evictions the
// metric of each registry adds up (Gearman and Beanstalk share one
// counter, jobgate_trace_table_evicted_total).
var evictedSources struct {
	mu  sync.Mutex
	fns map[*metrics.Metrics][]func() uint64
}

// registerEvictedMetric exports how many traced upstream jobs the
// gateways forgot because their table (tracing.table_size) was full:
// evicted is one gateway's count, added to those registered before.
func registerEvictedMetric(m *metrics.Metrics, tr *tracing.Tracer, evicted func() uint64) {
	if m == nil || tr == nil {
		return
	}
	evictedSources.mu.Lock()
	defer evictedSources.mu.Unlock()
	if evictedSources.fns == nil {
		evictedSources.fns = map[*metrics.Metrics][]func() uint64{}
	}
	first := len(evictedSources.fns[m]) == 0
	evictedSources.fns[m] = append(evictedSources.fns[m], evicted)
	if !first {
		return
	}
	m.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "jobgate_trace_table_evicted_total",
		Help: "Traced jobs on upstream servers whose trace state the gateway dropped because tracing.table_size was reached.",
	}, func() float64 {
		evictedSources.mu.Lock()
		fns := evictedSources.fns[m]
		evictedSources.mu.Unlock()
		var n uint64
		for _, f := range fns {
			n += f()
		}
		return float64(n)
	}))
}

// stopTracing flushes the spans still queued, within timeout, once the
// servers have stopped (which ended the spans of jobs in flight).
func stopTracing(p *tracing.Provider, timeout time.Duration, log *slog.Logger) {
	if p == nil || !p.Enabled() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("tracing shutdown", "err", err)
	}
	if d, f := p.Dropped(), p.ExportFailed(); d > 0 || f > 0 {
		log.Warn("spans lost", "dropped", d, "export_failed", f)
	}
}
