package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Provider owns the OpenTelemetry tracer provider, its exporter and its
// export queue. Build one with [New] at start-up and call [Provider.Shutdown]
// on the way out so queued spans reach the collector. Its methods are safe
// for concurrent use.
type Provider struct {
	cfg  Config
	tp   trace.TracerProvider
	sdk  *sdktrace.TracerProvider // nil when tracing is off
	proc *dropCounter             // nil when tracing is off
	lean *leanPipe                // job spans' queue; nil when tracing is off
}

// Option changes how [New] builds a Provider; the zero set builds the OTLP
// exporter that the Config describes.
type Option func(*options)

type options struct {
	exporter sdktrace.SpanExporter
}

// WithExporter makes the Provider send spans to e instead of an OTLP
// exporter, for tests (tracetest.InMemoryExporter) and debugging (stdouttrace).
// Queueing, dropping and sampling behave as with OTLP.
func WithExporter(e sdktrace.SpanExporter) Option {
	return func(o *options) { o.exporter = e }
}

// New resolves cfg against the environment ([Config.WithEnv]) and builds the
// provider. With tracing off it returns a Provider whose tracers make no-op
// spans at almost no cost, so callers need not branch. New does not connect
// to the collector; exports that fail later are reported through
// otel.Handle and never block or fail the data path.
func New(ctx context.Context, cfg Config, opts ...Option) (*Provider, error) {
	rc, err := cfg.WithEnv()
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	p := &Provider{cfg: rc}
	if !rc.Enabled {
		p.tp = noop.NewTracerProvider()
		return p, nil
	}

	exp := o.exporter
	if exp == nil {
		if exp, err = newOTLPExporter(ctx, rc); err != nil {
			return nil, err
		}
	}
	res, err := newResource(ctx, rc)
	if err != nil {
		return nil, errors.Join(err, exp.Shutdown(ctx))
	}
	p.proc = newDropCounter(exp, rc.QueueSize)
	p.sdk = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(newSampler(rc)),
		sdktrace.WithSpanProcessor(p.proc),
	)
	p.tp = p.sdk
	// Job spans take the lean path (lean_span.go): its own queue, encoder
	// and OTLP client, or the same exporter, fed the decoded encoding.
	var sink leanSink = exporterSink{exp: o.exporter}
	switch {
	case o.exporter != nil:
	case rc.Protocol == ProtocolGRPC:
		client, err := newOTLPClient(ctx, rc)
		if err != nil {
			return nil, errors.Join(err, p.sdk.Shutdown(ctx))
		}
		sink = otlpSink{client: client}
	default:
		// OTLP/HTTP: our own sender posts the encoded batch without the
		// client's copy (lean_http.go).
		hs, err := newHTTPSink(rc.Endpoint)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("tracing: %s client for %s: %w", rc.Protocol, rc.Endpoint, err), p.sdk.Shutdown(ctx))
		}
		sink = hs
	}
	p.lean = newLeanPipe(p.tp, newLeanEncoder(res, leanScope), sink, rc.QueueSize, false)
	p.lean.allowInline(!rc.ExportOffLoop)
	return p, nil
}

// leanScope is the instrumentation scope NewTracer gives the SDK tracer.
var leanScope = instrumentation.Scope{Name: ScopeName, Version: "1", SchemaURL: semconv.SchemaURL}

// newOTLPClient builds and starts the lean path's OTLP client for
// rc.Protocol, configured as newOTLPExporter configures the SDK's.
func newOTLPClient(ctx context.Context, rc Config) (otlptrace.Client, error) {
	var c otlptrace.Client
	switch rc.Protocol {
	case ProtocolGRPC:
		c = otlptracegrpc.NewClient(otlptracegrpc.WithEndpointURL(rc.Endpoint))
	default:
		c = otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(rc.Endpoint))
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("tracing: %s client for %s: %w", rc.Protocol, rc.Endpoint, err)
	}
	return c, nil
}

// NewSyncTracer returns a Tracer whose job spans take the lean path that
// a Provider's Tracers take, but are exported at once, on the goroutine
// that ends them: each is encoded as OTLP protobuf, decoded back with the
// official OTLP types and handed to sp.OnEnd. Command spans go to sp
// through an SDK provider. For tests (tracetest.SpanRecorder) and
// debugging: what sp sees is what a collector would receive. cfg is
// completed with the defaults, not the environment.
func NewSyncTracer(sys System, cfg Config, sp sdktrace.SpanProcessor) *Tracer {
	rc, _ := cfg.resolve(func(string) (string, bool) { return "", false })
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(rc.ServiceName))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(newSampler(rc)),
		sdktrace.WithSpanProcessor(sp))
	pipe := newLeanPipe(tp, newLeanEncoder(res, leanScope), processorSink{sp: sp}, rc.QueueSize, true)
	t := NewTracer(tp, sys, rc)
	t.lean = &leanTracer{system: string(sys), sampler: newLeanSampler(rc), pipe: pipe}
	return t
}

// newOTLPExporter builds the exporter for rc.Protocol. The endpoint is passed
// explicitly because WithEnv already applied the environment to it; the
// exporters still read the variables Config does not model (headers,
// certificates, compression, timeout).
func newOTLPExporter(ctx context.Context, rc Config) (sdktrace.SpanExporter, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch rc.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(rc.Endpoint))
	default:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(rc.Endpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %s exporter for %s: %w", rc.Protocol, rc.Endpoint, err)
	}
	return exp, nil
}

// newResource describes this process: OTEL_RESOURCE_ATTRIBUTES, the SDK's
// own attributes, and the resolved service name last so it wins.
func newResource(ctx context.Context, rc Config) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(rc.ServiceName)),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return res, nil
}

// newSampler maps the resolved sampler name to the SDK sampler.
func newSampler(rc Config) sdktrace.Sampler {
	switch rc.Sampler {
	case SamplerAlwaysOn:
		return sdktrace.AlwaysSample()
	case SamplerAlwaysOff:
		return sdktrace.NeverSample()
	case SamplerTraceIDRatio:
		return sdktrace.TraceIDRatioBased(rc.SampleRatio)
	case SamplerParentBasedAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case SamplerParentBasedTraceIDRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(rc.SampleRatio))
	default:
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
}

// Config returns the resolved configuration: cfg as given to New, completed
// from the environment and the defaults. Log it at start-up.
func (p *Provider) Config() Config { return p.cfg }

// Enabled reports whether spans are recorded and exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// TracerProvider returns the OpenTelemetry tracer provider, a no-op one when
// tracing is off. Install it with otel.SetTracerProvider if libraries should
// use it too.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Tracer returns the job-lifecycle span helpers for one messaging system,
// configured from the Provider's Config. With tracing off it returns nil,
// which is a valid *Tracer whose spans are no-ops.
func (p *Provider) Tracer(sys System) *Tracer {
	if p.sdk == nil {
		return nil
	}
	t := NewTracer(p.tp, sys, p.cfg)
	t.lean = &leanTracer{system: string(sys), sampler: newLeanSampler(p.cfg), pipe: p.lean}
	return t
}

// Dropped returns how many finished spans were discarded because the export
// queue was full: the collector is slow or unreachable. It only grows;
// export it as a counter metric.
func (p *Provider) Dropped() uint64 {
	if p.proc == nil {
		return 0
	}
	return p.proc.dropped.Load() + p.lean.dropped.Load()
}

// ExportFailed returns how many spans were lost because their export failed
// after the exporter's own retries (collector down, rejected request). It
// only grows; export it as a counter metric next to Dropped.
func (p *Provider) ExportFailed() uint64 {
	if p.proc == nil {
		return 0
	}
	return p.proc.failed.Load() + p.lean.failed.Load()
}

// ForceFlush exports every queued span and waits for it, or for ctx.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	return errors.Join(p.lean.forceFlush(ctx), p.sdk.ForceFlush(ctx))
}

// Shutdown flushes the queue to the exporter, then stops it. It waits at most
// until ctx is done, so give it a deadline: a collector that does not answer
// must not hold up the process exit; when ctx ends first, an upload in
// progress is canceled and the spans not exported count as failed
// (ExportFailed). End the spans of jobs in flight first:
// a span still open at Shutdown, or started after it, is never exported.
// Only the first call does anything.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	// The lean queue first: it may share the exporter, which the SDK's
	// shutdown then shuts down.
	return errors.Join(p.lean.shutdown(ctx), p.sdk.Shutdown(ctx))
}

// flushSlack is room in the SDK's queue beyond the admitted spans for
// ForceFlush markers, which share the queue; without it a flush could
// occupy a slot an admitted span needs, and the SDK would drop that span
// where we cannot count it.
const flushSlack = 16

// dropCounter wraps the SDK's BatchSpanProcessor to count the spans it drops.
//
// The SDK processor already never blocks (WithBlocking is off by default: a
// full queue drops the span in OnEnd), but it keeps its drop count private.
// So dropCounter does the admission itself: it counts spans handed to the
// SDK processor and not yet handed to the exporter (inflight), and refuses,
// counting, any span that would take inflight over the limit. The SDK queue
// holds at most inflight spans and has limit+flushSlack slots, so the SDK
// itself never drops and every loss is counted here.
//
// Admitted spans go to a handoff buffer (handoff.go), which passes them to
// the SDK processor in batches from a goroutine of its own: the SDK wakes
// its goroutine for every span ended, and on the Gearman server's event
// loop that wakeup per span cost far more than the span itself.
type dropCounter struct {
	sdktrace.SpanProcessor
	limit    int64
	inflight atomic.Int64
	dropped  atomic.Uint64
	failed   atomic.Uint64
	hand     handoff
}

var _ sdktrace.SpanProcessor = (*dropCounter)(nil)

func newDropCounter(exp sdktrace.SpanExporter, limit int) *dropCounter {
	d := &dropCounter{limit: int64(limit)}
	// A batch larger than the limit would never fill, so exports would
	// wait for the batch timer while new spans are refused.
	batch := min(sdktrace.DefaultMaxExportBatchSize, limit)
	d.SpanProcessor = sdktrace.NewBatchSpanProcessor(
		&countingExporter{SpanExporter: exp, d: d},
		sdktrace.WithMaxQueueSize(limit+flushSlack),
		sdktrace.WithMaxExportBatchSize(batch),
	)
	d.hand.start(d.SpanProcessor, min(handoffBatch, limit))
	return d
}

// OnEnd admits s to the export queue or drops and counts it. It never blocks.
func (d *dropCounter) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor ignores these too
	}
	if d.inflight.Add(1) > d.limit {
		d.inflight.Add(-1)
		d.dropped.Add(1)
		return
	}
	d.hand.add(s)
}

// ForceFlush hands the buffered spans to the SDK processor, then flushes it.
func (d *dropCounter) ForceFlush(ctx context.Context) error {
	d.hand.drain()
	return d.SpanProcessor.ForceFlush(ctx)
}

// Shutdown stops the handoff, hands over what it holds, then shuts the SDK
// processor down (which exports the rest).
func (d *dropCounter) Shutdown(ctx context.Context) error {
	d.hand.stop()
	return d.SpanProcessor.Shutdown(ctx)
}

// countingExporter tells the dropCounter when spans leave the SDK queue.
type countingExporter struct {
	sdktrace.SpanExporter
	d *dropCounter
}

// ExportSpans releases the spans' queue slots before exporting, because they
// have left the queue whether or not the export then succeeds or returns,
// and counts the spans of a failed export: the exporter has already retried
// them, and the batch processor discards them.
func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.d.inflight.Add(-int64(len(spans)))
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.d.failed.Add(uint64(len(spans)))
	}
	return err
}
