package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
)

// Sending a batch inline: the goroutine whose span fills a batch (a
// server's event loop) encodes it and writes it to the receiver's
// connection itself, when that needs no wait; only what cannot go at once
// is left to the export goroutine.
//
// Why: on a machine whose CPUs the event loops already fill, the export
// goroutine waking for every batch is one more runnable thread, which
// preempts a loop; the loops then wait on each other more, and throughput
// falls by more than the export's own CPU ("Round 10" under Tracing in
// docs/BENCHMARKS.md). Sending on the loop costs it the encoding (about
// 0.7 µs per job) and a write, but no thread wakes.
//
// It never waits: a connection not yet open, a reply to the previous
// inline request not yet there whole, or a socket buffer that takes only
// part of the request sends the rest of the work to the export goroutine,
// which finishes it the usual way. A batch sent inline is not kept, so
// not retried: a retryable reply (429, 503...) counts its spans as failed,
// and the next batches go the export goroutine's way, with its retries,
// until one succeeds.

// inlineSink is a leanSink that can take a batch without waiting.
type inlineSink interface {
	// inlineCapable reports whether tryInline can ever send (a plain
	// connection of the sink's own; not TLS, gzip or net/http).
	inlineCapable() bool
	// onReply sets what is told of the reply to a batch sent inline: its
	// span count and the upload's error, nil for success.
	onReply(report func(n int, err error))
	// tryInline sends req, an encoded request of n spans, if it can
	// without waiting. written is how many bytes of the request (headers
	// included) went; sent that all of it did.
	tryInline(req []byte, n int) (written int, sent bool)
	// finishInline sends the rest of a request tryInline began (written
	// bytes of it went), or all of it, the usual way, and waits for the
	// reply. It returns the error for the batch's n spans.
	finishInline(ctx context.Context, req []byte, written, n int) error
	// settle waits for the reply to the last request sent, if one is
	// still to come, and reports it.
	settle(ctx context.Context)
}

// inlineHandoff is a batch an inline send could not finish, and how much
// of its request went.
type inlineHandoff struct {
	batch   leanBatch
	written int
}

// allowInline lets the goroutines that fill batches send them when the
// sink can (Config.ExportOffLoop turns it off). It is called once, before
// any span is enqueued.
func (p *leanPipe) allowInline(on bool) {
	if is, ok := p.sink.(inlineSink); ok && on && !p.sync && is.inlineCapable() {
		p.inl = is
		is.onReply(p.accountInline)
	}
}

// accountInline counts the failed spans of a batch sent inline at once
// and keeps the error for the export goroutine to report (reportInline):
// the error handler writes a log line, which an event loop must not wait
// for. syncMu is held.
func (p *leanPipe) accountInline(n int, err error) {
	if err == nil {
		return
	}
	p.failed.Add(failedSpans(n, err))
	p.inlineErr = err
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// reportInline reports the last error accountInline kept; syncMu is held.
func (p *leanPipe) reportInline() {
	if err := p.inlineErr; err != nil {
		p.inlineErr = nil
		otel.Handle(err)
	}
}

// exportInline sends one batch from the queue on the calling goroutine;
// syncMu is held. It returns false when the export goroutine must be
// woken: for what this send left, or because an earlier one still waits.
func (p *leanPipe) exportInline() bool {
	if p.hand.batch.buf != nil {
		return false
	}
	b, ok := p.take(false)
	if !ok {
		return true
	}
	written, sent := p.inl.tryInline(b.request(), b.n)
	if sent {
		p.inlined.Add(1)
		p.release(b)
		return true
	}
	if written > 0 {
		p.handed.Add(1)
	}
	p.hand = inlineHandoff{batch: b, written: written}
	return false
}

// finishHandoff completes what an inline send left; syncMu is held.
func (p *leanPipe) finishHandoff(ctx context.Context) {
	h := p.hand
	if h.batch.buf == nil {
		return
	}
	p.hand = inlineHandoff{}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	b := h.batch
	p.account(b.n, p.inl.finishInline(ctx, b.request(), h.written, b.n))
	p.release(b)
}
