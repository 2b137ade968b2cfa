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

// leanPipe is the lean path's export queue. Ending a span encodes it into
// the batch being filled, under a mutex, and recycles its record at once;
// only when a batch is full is the export goroutine woken, so the data
// path never blocks and is not woken per span (the cost handoff.go removed
// for the SDK path). When the queue holds its limit of spans, the span is
// dropped and counted. The goroutine uploads each full batch, unless the
// goroutine that filled it could send it itself without waiting
// (lean_inline.go).
//
// Why at the span's end: a record encoded then is still in the cache, and
// goes back to the pool while it is; the next span takes it warm. Records
// kept until their batch was full (512 spans, 245 KB) came back cold, and
// starting a span began with a cache miss ("Round 18" under Tracing in
// docs/BENCHMARKS.md).
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
	// syncMu is held by whoever uploads: the sink is used by one goroutine
	// at a time.
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

	// mu guards the encoder and the batches.
	mu     sync.Mutex
	fill   leanBatch   // the batch ending spans are encoded into
	full   []leanBatch // sealed batches waiting for export, oldest first
	queued int         // spans in fill and full
	free   [][]byte    // buffers of exported batches, for reuse
	// capture, set by tests only, takes ended records instead of
	// encoding them (benchmarks of the encoder need records).
	capture func(*leanSpan)

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
	if p.capture != nil {
		p.capture(s)
		return
	}
	if p.sync {
		p.syncMu.Lock()
		p.mu.Lock()
		b := p.enc.begin(p.takeFree())
		p.enc.add(&b, s)
		p.enc.seal(&b)
		p.mu.Unlock()
		s.recycle()
		p.export(context.Background(), b)
		p.syncMu.Unlock()
		return
	}
	p.mu.Lock()
	if p.queued >= p.limit {
		p.mu.Unlock()
		p.dropped.Add(1)
		s.recycle()
		return
	}
	if p.fill.buf == nil {
		p.fill = p.enc.begin(p.takeFree())
	}
	p.enc.add(&p.fill, s)
	p.queued++
	full := p.fill.n >= p.batch
	if full {
		p.sealFill()
	}
	p.mu.Unlock()
	// Encoded: the record can serve a new span (lean_recycle.go).
	s.recycle()
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

// sealFill seals the batch being filled and queues it; p.mu is held.
func (p *leanPipe) sealFill() {
	p.enc.seal(&p.fill)
	p.full = append(p.full, p.fill)
	p.fill = leanBatch{}
}

// takeFree returns the buffer of an exported batch, or nil; p.mu is held.
func (p *leanPipe) takeFree() []byte {
	n := len(p.free)
	if n == 0 {
		return nil
	}
	b := p.free[n-1]
	p.free[n-1] = nil
	p.free = p.free[:n-1]
	return b
}

// Buffers kept for reuse: enough for the batch being filled, one waiting
// and one in flight, each of at most leanMaxFreeBuf bytes (one odd batch
// of huge spans does not hold its memory).
const (
	leanMaxFree    = 3
	leanMaxFreeBuf = 4 << 20
)

// release keeps the buffer of exported batch b for reuse.
func (p *leanPipe) release(b leanBatch) {
	if cap(b.buf) > leanMaxFreeBuf {
		return
	}
	p.mu.Lock()
	if len(p.free) < leanMaxFree {
		p.free = append(p.free, b.buf)
	}
	p.mu.Unlock()
}

// take removes the oldest full batch from the queue, or with all the
// batch being filled when it holds any span.
func (p *leanPipe) take(all bool) (leanBatch, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.full) == 0 {
		if !all || p.fill.n == 0 {
			return leanBatch{}, false
		}
		p.sealFill()
	}
	b := p.full[0]
	n := copy(p.full, p.full[1:])
	p.full[n] = leanBatch{}
	p.full = p.full[:n]
	p.queued -= b.n
	return b, true
}

// drain finishes what an inline send left, then exports the full batches,
// and with all the one being filled too. With all, it also waits for the
// reply to the last inline send, so that a flush returns once the
// receiver has answered every span.
func (p *leanPipe) drain(ctx context.Context, all bool) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.finishHandoff(ctx)
	for {
		b, ok := p.take(all)
		if !ok {
			break
		}
		p.export(ctx, b)
	}
	if all && p.inl != nil {
		sctx, cancel := context.WithTimeout(ctx, p.timeout)
		p.inl.settle(sctx)
		cancel()
	}
	p.reportInline()
}

// export uploads sealed batch b and keeps its buffer for reuse.
func (p *leanPipe) export(ctx context.Context, b leanBatch) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var err error
	if ru, ok := p.sink.(requestUploader); ok {
		err = ru.uploadRequest(ctx, b.request(), b.n)
	} else {
		err = p.sink.upload(ctx, b.body(), b.n)
	}
	p.account(b.n, err)
	p.release(b)
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
