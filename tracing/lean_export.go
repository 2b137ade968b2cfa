package tracing

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Defaults of the batches, as the SDK's batch processor has them and
// reads them from OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT (in
// milliseconds) and OTEL_BSP_MAX_EXPORT_BATCH_SIZE. Larger batches mean
// fewer posts but a longer stall of the event loop that encodes one
// ("Round 10" under Tracing in docs/BENCHMARKS.md).
const (
	leanDefaultDelay   = 5 * time.Second
	leanDefaultTimeout = 30 * time.Second
	leanMaxBatch       = 512
)

// leanSink receives encoded batches: the body of one OTLP ResourceSpans
// message holding n spans.
type leanSink interface {
	upload(ctx context.Context, resourceSpans []byte, n int) error
	stop(ctx context.Context) error
}

// leanPipe is the lean path's export queue. Ending a span appends it to a
// bounded slice under a mutex and, only when a batch is full, wakes the
// export goroutine, so the data path never blocks and is not woken per
// span (the cost handoff.go removed for the SDK path). When the queue is
// full the span is dropped and counted. The goroutine encodes each batch
// into reused buffers and uploads it, unless the goroutine that filled the
// batch could send it itself without waiting (lean_inline.go).
type leanPipe struct {
	tp    trace.TracerProvider
	enc   leanEncoder
	sink  leanSink
	limit int
	batch int
	delay time.Duration
	// timeout bounds one upload.
	timeout time.Duration
	// sync makes enqueue export at once, on the caller's goroutine
	// (NewSyncTracer).
	sync bool
	// syncMu is held by whoever encodes or uploads: the encoder's buffers
	// and the sink are used by one goroutine at a time.
	syncMu sync.Mutex
	// inl, when not nil, lets the goroutine that fills a batch send it
	// itself if that needs no wait (lean_inline.go); hand is what such a
	// send left for the export goroutine. Both under syncMu.
	inl       inlineSink
	hand      inlineHandoff
	inlineErr error // kept by accountInline for reportInline
	// inlined counts batches sent whole inline, handed those an inline
	// send began and the export goroutine finished (for tests).
	inlined, handed atomic.Uint64

	mu    sync.Mutex
	queue []*leanSpan
	spare []*leanSpan

	closed  atomic.Bool
	dropped atomic.Uint64
	failed  atomic.Uint64

	wake   chan struct{}
	flush  chan chan struct{}
	stopCh chan context.Context
	done   chan error
	// life is the context of exports the goroutine starts itself; kill
	// cancels it when Shutdown's context ends before the goroutine took
	// the stop, so an upload in progress ends then.
	life context.Context
	kill context.CancelFunc
}

func newLeanPipe(tp trace.TracerProvider, enc leanEncoder, sink leanSink, limit int, sync bool) *leanPipe {
	p := &leanPipe{
		tp: tp, enc: enc, sink: sink,
		limit:   limit,
		batch:   min(envCount("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", leanMaxBatch), limit),
		delay:   envMillis("OTEL_BSP_SCHEDULE_DELAY", leanDefaultDelay),
		timeout: envMillis("OTEL_BSP_EXPORT_TIMEOUT", leanDefaultTimeout),
		wake:    make(chan struct{}, 1),
		flush:   make(chan chan struct{}),
		stopCh:  make(chan context.Context),
		done:    make(chan error, 1),
		sync:    sync,
	}
	p.life, p.kill = context.WithCancel(context.Background())
	if !sync {
		go p.run()
	}
	return p
}

// envMillis reads a positive number of milliseconds from the environment.
func envMillis(name string, def time.Duration) time.Duration {
	v, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name)))
	if err != nil || v <= 0 {
		return def
	}
	return time.Duration(v) * time.Millisecond
}

// envCount reads a positive count from the environment.
func envCount(name string, def int) int {
	v, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name)))
	if err != nil || v <= 0 {
		return def
	}
	return v
}

// enqueue admits an ended span for export, or drops and counts it.
func (p *leanPipe) enqueue(s *leanSpan) {
	if p.closed.Load() {
		s.recycle() // ended after Shutdown: never exported, as documented
		return
	}
	if p.sync {
		p.syncMu.Lock()
		p.export(context.Background(), []*leanSpan{s})
		p.syncMu.Unlock()
		return
	}
	p.mu.Lock()
	if len(p.queue) >= p.limit {
		p.mu.Unlock()
		p.dropped.Add(1)
		s.recycle()
		return
	}
	p.queue = append(p.queue, s)
	full := len(p.queue) >= p.batch
	p.mu.Unlock()
	if full && p.inl != nil && p.syncMu.TryLock() {
		sent := p.exportInline()
		p.syncMu.Unlock()
		if sent {
			return
		}
	}
	if full {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// take removes up to one batch from the queue. The returned slice is
// valid until the next take.
func (p *leanPipe) take() []*leanSpan {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(p.queue), p.batch)
	if n == 0 {
		return nil
	}
	out := append(p.spare[:0], p.queue[:n]...)
	rest := copy(p.queue, p.queue[n:])
	clear(p.queue[rest:])
	p.queue = p.queue[:rest]
	p.spare = out
	return out
}

// drain finishes what an inline send left, then exports batches until
// the queue is empty (or holds less than a batch, unless all). With all,
// it also waits for the reply to the last inline send, so that a flush
// returns once the receiver has answered every span.
func (p *leanPipe) drain(ctx context.Context, all bool) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.finishHandoff(ctx)
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 0 || (!all && n < p.batch) {
			break
		}
		b := p.take()
		p.export(ctx, b)
		clear(b)
	}
	if all && p.inl != nil {
		sctx, cancel := context.WithTimeout(ctx, p.timeout)
		p.inl.settle(sctx)
		cancel()
	}
	p.reportInline()
}

func (p *leanPipe) export(ctx context.Context, spans []*leanSpan) {
	if len(spans) == 0 {
		return
	}
	body := p.enc.encode(spans)
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var err error
	if ru, ok := p.sink.(requestUploader); ok {
		err = ru.uploadRequest(ctx, p.enc.request(), len(spans))
	} else {
		err = p.sink.upload(ctx, body, len(spans))
	}
	p.account(len(spans), err)
	// Encoded: the records can serve new spans (lean_recycle.go).
	for _, s := range spans {
		s.recycle()
	}
}

// account counts the spans of a batch of n that an upload's error says
// failed, and reports the error.
func (p *leanPipe) account(n int, err error) {
	if err == nil {
		return
	}
	p.failed.Add(failedSpans(n, err))
	otel.Handle(err)
}

// failedSpans is how many spans of a batch of n failed, by the upload's
// error: a partial success took the batch but for the spans it rejected.
func failedSpans(n int, err error) uint64 {
	failed := uint64(n)
	if ps := (*partialSuccessError)(nil); errors.As(err, &ps) {
		failed = min(uint64(ps.rejected), failed)
	}
	return failed
}

func (p *leanPipe) run() {
	tick := time.NewTicker(p.delay)
	defer tick.Stop()
	for {
		select {
		case <-p.wake:
			p.drain(p.life, false)
		case <-tick.C:
			p.drain(p.life, true)
		case reply := <-p.flush:
			p.drain(p.life, true)
			close(reply)
		case ctx := <-p.stopCh:
			p.drain(ctx, true)
			p.done <- p.sink.stop(ctx)
			p.kill()
			return
		case <-p.life.Done():
			// Shutdown gave up waiting: what is left fails at once.
			p.drain(p.life, true)
			p.done <- p.sink.stop(p.life)
			return
		}
	}
}

// forceFlush exports every queued span and waits for it, or for ctx.
func (p *leanPipe) forceFlush(ctx context.Context) error {
	if p.closed.Load() || p.sync {
		return nil
	}
	reply := make(chan struct{})
	select {
	case p.flush <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shutdown refuses new spans, exports the queue and stops the sink. Only
// the first call does anything.
func (p *leanPipe) shutdown(ctx context.Context) error {
	if p.closed.Swap(true) || p.sync {
		return nil
	}
	// ctx ending cancels an upload in progress, as the OTLP client's
	// Shutdown does, and then ends the export goroutine.
	select {
	case p.stopCh <- ctx:
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	}
}

// otlpSink uploads through an otlptrace.Client (HTTP or gRPC), so the
// exporters' handling of endpoints, TLS, headers, compression, timeouts and
// retries applies unchanged. The encoded bytes ride in the ResourceSpans
// message as unknown fields, which protobuf marshals back verbatim: the
// client's proto.Marshal then costs one copy instead of a walk over
// thousands of small messages.
type otlpSink struct {
	client otlptrace.Client
}

func (s otlpSink) upload(ctx context.Context, body []byte, _ int) error {
	rs := &tracepb.ResourceSpans{}
	rs.ProtoReflect().SetUnknown(protoreflect.RawFields(body))
	return s.client.UploadTraces(ctx, []*tracepb.ResourceSpans{rs})
}

func (s otlpSink) stop(ctx context.Context) error { return s.client.Stop(ctx) }

// exporterSink decodes each batch back into SDK spans for an
// sdktrace.SpanExporter (WithExporter, NewSyncTracer): tests and debugging
// output then see exactly what an OTLP collector would receive. It does not
// shut the exporter down; the SDK pipeline, which shares it, does.
type exporterSink struct {
	exp sdktrace.SpanExporter
}

func (s exporterSink) upload(ctx context.Context, body []byte, _ int) error {
	spans, err := decodeResourceSpans(body)
	if err != nil {
		return errors.Join(errors.New("tracing: lean span encoding does not decode"), err)
	}
	return s.exp.ExportSpans(ctx, spans)
}

func (exporterSink) stop(context.Context) error { return nil }

// processorSink decodes each batch like exporterSink and hands the spans
// to a span processor one by one (NewSyncTracer).
type processorSink struct {
	sp sdktrace.SpanProcessor
}

func (s processorSink) upload(_ context.Context, body []byte, _ int) error {
	spans, err := decodeResourceSpans(body)
	if err != nil {
		return errors.Join(errors.New("tracing: lean span encoding does not decode"), err)
	}
	for _, ro := range spans {
		s.sp.OnEnd(ro)
	}
	return nil
}

func (processorSink) stop(context.Context) error { return nil }
