package tracing

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

func TestProviderDisabled(t *testing.T) {
	clearEnv(t)
	p, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() || p.Tracer(Gearman) != nil || p.Dropped() != 0 {
		t.Fatal("zero Config without env should be off, with a nil Tracer")
	}
	if _, span := p.TracerProvider().Tracer("x").Start(context.Background(), "y"); span.IsRecording() {
		t.Fatal("disabled provider records spans")
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestProviderInvalidConfig(t *testing.T) {
	clearEnv(t)
	if _, err := New(context.Background(), Config{Enabled: true, Protocol: "carrier-pigeon"}); err == nil {
		t.Fatal("New accepted an unknown protocol")
	}
}

// TestProviderExportsAndFlushes: with a custom exporter, spans go through
// the queue, Shutdown flushes them, and later spans are dropped, counted.
func TestProviderExportsAndFlushes(t *testing.T) {
	clearEnv(t)
	ctx := context.Background()
	exp := &keepExporter{}
	p, err := New(ctx, Config{Enabled: true, ServiceName: "unit", CommandSpans: true}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	tr := p.Tracer(Gearman)
	if tr == nil || !tr.CommandSpans() || tr.PayloadTraceparent() {
		t.Fatal("Tracer should carry the Config switches")
	}
	s := tr.StartSend(ctx, Message{Destination: "f"})
	s.Created("H:1")
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := exp.get()
	if len(spans) != 1 || spans[0].Name != "send f" {
		t.Fatalf("exported %v, want the send span", spans)
	}
	if v, _ := spans[0].Resource.Set().Value("service.name"); v.AsString() != "unit" {
		t.Errorf("service.name = %q, want unit", v.AsString())
	}
	late := tr.StartSend(ctx, Message{Destination: "late"})
	late.End()
	if late.Span().IsRecording() || p.Dropped() != 0 || len(exp.get()) != 1 {
		t.Errorf("a span after Shutdown should be a no-op, not exported or counted")
	}
}

// blockingExporter stands for a collector that never answers: every export
// blocks until the test releases it.
type blockingExporter struct {
	release chan struct{}
	calls   atomic.Int64
	spans   atomic.Int64
}

func (e *blockingExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.calls.Add(1)
	e.spans.Add(int64(len(s)))
	<-e.release
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

// endMany ends n spans from another goroutine and fails the test if that
// does not finish: the deadline only guards against a hang, it measures
// nothing.
func endMany(t *testing.T, start func(i int), n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			start(i)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ending spans blocked behind a stuck exporter")
	}
}

// TestSDKBatchProcessorDoesNotBlock verifies the premise the Provider
// builds on: the SDK's BatchSpanProcessor, without WithBlocking, drops
// rather than blocks when its exporter is stuck and its queue full.
func TestSDKBatchProcessorDoesNotBlock(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	bsp := sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithMaxQueueSize(4), sdktrace.WithMaxExportBatchSize(2))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bsp))
	defer func() {
		close(exp.release)
		_ = tp.Shutdown(context.Background())
	}()
	tracer := tp.Tracer("t")
	endMany(t, func(int) {
		_, s := tracer.Start(context.Background(), "s")
		s.End()
	}, 1000)
}

// TestProviderNeverBlocks: behind a stuck exporter and a tiny queue, ending
// many spans returns at once and every span not queued is counted.
func TestProviderNeverBlocks(t *testing.T) {
	clearEnv(t)
	const queue, n = 8, 2000
	exp := &blockingExporter{release: make(chan struct{})}
	p, err := New(context.Background(), Config{Enabled: true, QueueSize: queue}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(exp.release)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown after release: %v", err)
		}
	}()
	tr := p.Tracer(Beanstalk)
	endMany(t, func(int) {
		_, proc := tr.StartProcess(context.Background(), Creation{}, Message{Destination: "t"})
		proc.Complete()
	}, n)

	// At most one batch is stuck in the exporter and one queue's worth
	// waits behind it; everything else must have been dropped and counted.
	if d := p.Dropped(); d < n-2*queue || d > n {
		t.Fatalf("Dropped = %d, want between %d and %d", d, n-2*queue, n)
	}
	if c := exp.calls.Load(); c > 1 {
		t.Fatalf("exporter called %d times while stuck, want at most 1", c)
	}
}

// TestProviderDropAccounting: with a working exporter, every span is
// either exported or counted as dropped, never lost silently.
func TestProviderDropAccounting(t *testing.T) {
	clearEnv(t)
	exp := &countExporter{}
	p, err := New(context.Background(), Config{Enabled: true, QueueSize: 4}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	tr := p.Tracer(Gearman)
	var wg sync.WaitGroup
	const workers, each = 8, 500
	for range workers {
		wg.Go(func() {
			for range each {
				tr.StartSend(context.Background(), Message{Destination: "f"}).End()
			}
		})
	}
	wg.Wait()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.n.Load() + int64(p.Dropped()); got != workers*each {
		t.Fatalf("exported %d + dropped %d = %d, want %d", exp.n.Load(), p.Dropped(), got, workers*each)
	}
}

// keepExporter keeps what it exports past Shutdown, unlike
// tracetest.InMemoryExporter, which clears itself.
type keepExporter struct {
	mu    sync.Mutex
	spans tracetest.SpanStubs
}

func (e *keepExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans = append(e.spans, tracetest.SpanStubsFromReadOnlySpans(s)...)
	return nil
}
func (e *keepExporter) Shutdown(context.Context) error { return nil }
func (e *keepExporter) get() tracetest.SpanStubs {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.spans)
}

// countExporter counts exported spans; with fail set, it counts them and
// reports the export as failed.
type countExporter struct {
	n    atomic.Int64
	fail bool
}

func (e *countExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(s)))
	if e.fail {
		return errors.New("collector unavailable")
	}
	return nil
}
func (e *countExporter) Shutdown(context.Context) error { return nil }

// TestProviderExportFailed: spans whose export fails are counted apart
// from drops.
func TestProviderExportFailed(t *testing.T) {
	clearEnv(t)
	// The failures are expected; keep them out of the test log. The handler
	// is process-wide and cannot be truly restored (the default one
	// delegates to the first handler ever set), so it stays for the binary.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	exp := &countExporter{fail: true}
	p, err := New(context.Background(), Config{Enabled: true}, WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	traceJob(p.Tracer(Gearman))
	_ = p.Shutdown(context.Background())
	if p.ExportFailed() != 3 || p.Dropped() != 0 || exp.n.Load() != 3 {
		t.Fatalf("ExportFailed %d Dropped %d exported %d; want 3, 0, 3", p.ExportFailed(), p.Dropped(), exp.n.Load())
	}
}

// traceJob makes the three spans of one job on tr.
func traceJob(tr *Tracer) {
	ctx := context.Background()
	s := tr.StartSend(ctx, Message{Operation: "SUBMIT_JOB", Destination: "otlp", BodySize: 3})
	s.Created("H:x:1")
	m := Message{Operation: "JOB_ASSIGN", Destination: "otlp", ID: "H:x:1", BodySize: 3}
	tr.Receive(ctx, s.Creation(), m)
	_, p := tr.StartProcess(ctx, s.Creation(), m)
	p.Status("1", "2")
	p.Complete()
}

// collected gathers what a fake collector received.
type collected struct {
	mu    sync.Mutex
	reqs  []*collectortrace.ExportTraceServiceRequest
	paths []string
}

func (c *collected) add(path string, r *collectortrace.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, path)
	c.reqs = append(c.reqs, r)
}

// check asserts the collector got the job's three spans, in one trace, from
// service "otlp-test".
func (c *collected) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	traces := map[string]bool{}
	var send *tracepb.Span
	for _, r := range c.reqs {
		for _, rs := range r.GetResourceSpans() {
			var svc string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					svc = kv.GetValue().GetStringValue()
				}
			}
			if svc != "otlp-test" {
				t.Errorf("service.name %q, want otlp-test", svc)
			}
			for _, ss := range rs.GetScopeSpans() {
				if ss.GetScope().GetName() != ScopeName {
					t.Errorf("scope %q, want %q", ss.GetScope().GetName(), ScopeName)
				}
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
					traces[string(s.GetTraceId())] = true
					if s.GetKind() == tracepb.Span_SPAN_KIND_PRODUCER {
						send = s
					}
				}
			}
		}
	}
	slices.Sort(names)
	if want := []string{"process otlp", "receive otlp", "send otlp"}; !slices.Equal(names, want) {
		t.Fatalf("collector got spans %v, want %v", names, want)
	}
	if len(traces) != 1 || send == nil {
		t.Fatalf("spans in %d traces, want 1 with a producer span", len(traces))
	}
}

// TestOTLPHTTPExport runs a real otlptracehttp exporter against an
// in-process OTLP/HTTP receiver and checks that Shutdown delivers the job.
func TestOTLPHTTPExport(t *testing.T) {
	clearEnv(t)
	var got collected
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.add(r.URL.Path, &req)
		resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	defer srv.Close()

	// srv.URL has no path: the config rule appends /v1/traces.
	p, err := New(context.Background(), Config{Enabled: true, Endpoint: srv.URL, ServiceName: "otlp-test"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Config().Protocol != ProtocolHTTPProtobuf {
		t.Fatalf("default protocol %q", p.Config().Protocol)
	}
	traceJob(p.Tracer(Gearman))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got.check(t)
	for _, path := range got.paths {
		if path != "/v1/traces" {
			t.Errorf("POST to %q, want /v1/traces", path)
		}
	}
}

// traceService is an in-process OTLP/gRPC collector.
type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	got *collected
}

func (s *traceService) Export(_ context.Context, r *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.got.add("", r)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// TestOTLPGRPCExport does the same over gRPC, configured by environment
// only, as an operator would.
func TestOTLPGRPCExport(t *testing.T) {
	clearEnv(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got collected
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, &traceService{got: &got})
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_SERVICE_NAME", "otlp-test")
	p, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() || p.Config().Protocol != ProtocolGRPC {
		t.Fatalf("env should enable gRPC export, got %+v", p.Config())
	}
	traceJob(p.Tracer(Gearman))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got.check(t)
}
