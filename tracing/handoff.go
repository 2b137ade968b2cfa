package tracing

import (
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// handoffBatch is how many ended spans the handoff collects before it
// wakes its goroutine; handoffEvery is how long a smaller batch may wait.
// Spans wait in the SDK's batch processor afterwards anyway (its schedule
// delay, 5s by default), so the wait adds nothing visible.
const (
	handoffBatch = 64
	handoffEvery = 100 * time.Millisecond
)

// handoff batches ended spans between the data path and the SDK's batch
// processor. The SDK's OnEnd sends each span on a channel its goroutine
// waits on, so every span ended while that goroutine sleeps wakes it: a
// futex wake, and on the Gearman event loop a goroutine queued to run next
// on the loop's own processor while the loop blocks in epoll_wait, which
// tripled the latency of a traced job. add is a mutex and an append; the
// goroutine is woken once per handoffBatch spans (or by its ticker), and
// hands the batch over in one go, waking the SDK goroutine once.
//
// The buffer holds admitted spans only, which the dropCounter already
// counts as in flight, so it is bounded by the queue size.
type handoff struct {
	next sdktrace.SpanProcessor
	n    int           // batch size
	kick chan struct{} // cap 1: a batch is ready
	quit chan struct{} // closed by stop
	done chan struct{} // closed when the goroutine has ended

	mu    sync.Mutex
	buf   []sdktrace.ReadOnlySpan // guarded by mu
	spare []sdktrace.ReadOnlySpan // guarded by mu: the other buffer, reused
	// passMu serialises hand-overs, so spans reach next in the order
	// they were added.
	passMu sync.Mutex
	once   sync.Once
}

// start hands batches of n spans to next from a new goroutine.
func (h *handoff) start(next sdktrace.SpanProcessor, n int) {
	h.next, h.n = next, max(n, 1)
	h.kick = make(chan struct{}, 1)
	h.quit = make(chan struct{})
	h.done = make(chan struct{})
	go h.run()
}

// add buffers s; it never blocks on anything but the short mutex.
func (h *handoff) add(s sdktrace.ReadOnlySpan) {
	h.mu.Lock()
	h.buf = append(h.buf, s)
	full := len(h.buf) == h.n
	h.mu.Unlock()
	if full {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

func (h *handoff) run() {
	defer close(h.done)
	t := time.NewTicker(handoffEvery)
	defer t.Stop()
	for {
		select {
		case <-h.kick:
		case <-t.C:
		case <-h.quit:
			h.drain()
			return
		}
		h.drain()
	}
}

// drain hands every buffered span to next, in order.
func (h *handoff) drain() {
	h.passMu.Lock()
	defer h.passMu.Unlock()
	h.mu.Lock()
	batch := h.buf
	h.buf = h.spare[:0]
	h.spare = nil
	h.mu.Unlock()
	for i, s := range batch {
		h.next.OnEnd(s)
		batch[i] = nil
	}
	h.mu.Lock()
	if h.spare == nil && cap(batch) <= 4*h.n {
		h.spare = batch[:0]
	}
	h.mu.Unlock()
}

// stop ends the goroutine after a last drain; spans added later are
// handed over by the caller's own drain (ForceFlush) or not at all, as
// the SDK drops spans ended after Shutdown. Safe to call twice.
func (h *handoff) stop() {
	h.once.Do(func() { close(h.quit) })
	<-h.done
}
