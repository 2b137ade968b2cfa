package connlimit

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// Errors of Writer.
var (
	// ErrSlowReader: the client stopped reading and its unsent output
	// passed the limit; the connection is closed.
	ErrSlowReader = errors.New("connlimit: client not reading its replies: write buffer limit exceeded")
	// ErrWriteTimeout: a write made no progress for the write timeout; the
	// connection is closed.
	ErrWriteTimeout = errors.New("connlimit: client not reading its replies: write timed out")
	// ErrClosed: Write after Close or Abort.
	ErrClosed = errors.New("connlimit: writer closed")
)

// maxRetain is the largest buffer a Writer keeps for reuse once written
// out. A burst may grow a buffer to the limit (16MiB by default); keeping
// that per idle connection would make the limit a floor on memory, not a
// cap.
const maxRetain = 64 << 10

// WriterOptions configures a Writer. The zero value limits nothing.
type WriterOptions struct {
	// Limit caps unsent bytes (queued plus being written). A Write that
	// would take them past it cuts the client off, except that a Write
	// into an empty queue is always taken, whatever its size: a single
	// reply is bounded by the codec's frame limits, and refusing it would
	// break the protocol for a client that does read. Set it above the
	// largest frame. 0 means no limit.
	Limit int
	// WriteTimeout cuts the client off when a write to the socket makes
	// no progress for this long. A client reading slowly but steadily is
	// not cut off by it. 0 means no deadline.
	WriteTimeout time.Duration
	// OnCutoff, if not nil, is called once when the Writer cuts the client
	// off, with ReasonSlowReader or ReasonWriteTimeout: count it (metrics
	// ConnSeries.Cut) and log it at debug. The Writer's goroutine closes
	// the connection right after (Done is closed once it has). It is not
	// called for an ordinary write error (peer gone). It must not call the
	// Writer.
	OnCutoff func(r Reason)
}

// Writer queues output for a connection and writes it from its own
// goroutine, so the goroutines producing replies and async packets never
// block on a client that is slow to read, and a client that stops reading
// cannot make the queue grow without bound: past Limit unsent bytes, or a
// stalled write lasting WriteTimeout, the connection is closed (which also
// ends the connection's read loop) and every later Write fails.
//
// Output written while a socket write is in progress is coalesced into the
// next one. Writes from several goroutines are each kept whole, in the
// order their Write calls took the lock. It is safe for concurrent use.
type Writer struct {
	conn net.Conn
	opts WriterOptions

	mu       sync.Mutex // guards the fields below
	cond     sync.Cond  // on mu: pending became non-empty, or closing, or err set
	pending  []byte     // queued, not yet handed to the socket
	spare    []byte     // an emptied buffer for pending to reuse
	inflight int        // bytes in the socket write in progress
	closing  bool       // Close called: write out pending, then close
	err      error      // set once: the Writer is finished
	done     chan struct{}

	// dlMu orders failLocked's "stop" deadline against the pump renewing
	// the deadline for its next write, so a stop is never overwritten.
	// Lock order: mu before dlMu.
	dlMu    sync.Mutex
	stopped bool // guarded by dlMu
}

// NewWriter returns a Writer for c and starts its goroutine, which runs
// until Close, Abort, a cut-off or a write error.
func NewWriter(c net.Conn, o WriterOptions) *Writer {
	w := &Writer{conn: c, opts: o, done: make(chan struct{})}
	w.cond.L = &w.mu
	go w.pump()
	return w
}

// Write queues a copy of p. It never blocks on the network. It fails with
// ErrSlowReader when p would take the unsent bytes past the limit (the
// connection is then closed), and with the Writer's error once it has failed or been
// closed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.err != nil {
		defer w.mu.Unlock()
		return 0, w.err
	}
	if w.closing {
		w.mu.Unlock()
		return 0, ErrClosed
	}
	if len(p) == 0 {
		w.mu.Unlock()
		return 0, nil
	}
	unsent := len(w.pending) + w.inflight
	if w.opts.Limit > 0 && unsent > 0 && unsent+len(p) > w.opts.Limit {
		w.failLocked(ErrSlowReader)
		w.mu.Unlock()
		w.cutoff(ReasonSlowReader)
		return 0, ErrSlowReader
	}
	if w.pending == nil && w.spare != nil {
		w.pending, w.spare = w.spare, nil
	}
	w.pending = append(w.pending, p...)
	w.cond.Signal()
	w.mu.Unlock()
	return len(p), nil
}

// Buffered returns the unsent bytes: queued plus being written.
func (w *Writer) Buffered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending) + w.inflight
}

// Err returns the error that finished the Writer, or nil while it runs.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Done is closed when the Writer's goroutine has exited; the connection is
// closed by then.
func (w *Writer) Done() <-chan struct{} { return w.done }

// Close writes out what is queued, then closes the connection, and waits
// for both. A client that does not read holds it up for at most the write
// timeout per stalled write (forever with no timeout: use Abort). It
// returns nil, or the error that ended the Writer before everything was
// written.
func (w *Writer) Close() error {
	w.mu.Lock()
	if !w.closing && w.err == nil {
		w.closing = true
		w.cond.Signal()
	}
	w.mu.Unlock()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if errors.Is(w.err, ErrClosed) {
		return nil
	}
	return w.err
}

// Abort drops what is queued, stops a socket write in progress, closes the
// connection and waits for the Writer's goroutine.
func (w *Writer) Abort() error {
	w.mu.Lock()
	w.failLocked(ErrClosed)
	w.mu.Unlock()
	<-w.done
	return nil
}

// failLocked finishes the Writer with err and drops the queue, unless it
// is already finished. It does not close the connection itself: Close may
// do I/O (a TLS close_notify alert, which tls.Conn bounds at 5s against a
// peer that does not read), and that belongs neither under w.mu nor on a
// producer's goroutine. Instead it moves the write deadline into the past,
// which ends a socket write in progress at once, and leaves the Close to
// the pump.
func (w *Writer) failLocked(err error) {
	if w.err != nil {
		return
	}
	w.err = err
	w.pending, w.spare = nil, nil
	w.dlMu.Lock()
	w.stopped = true
	w.conn.SetWriteDeadline(aLongTimeAgo)
	w.dlMu.Unlock()
	w.cond.Signal()
}

// aLongTimeAgo is a deadline already past, as net/http uses to abort I/O.
var aLongTimeAgo = time.Unix(1, 0)

func (w *Writer) cutoff(r Reason) {
	if w.opts.OnCutoff != nil {
		w.opts.OnCutoff(r)
	}
}

// pump is the Writer's goroutine: it owns the socket writes and closes the
// connection when the Writer finishes.
func (w *Writer) pump() {
	defer func() {
		w.conn.Close()
		close(w.done)
	}()
	w.mu.Lock()
	for {
		for w.err == nil && len(w.pending) == 0 && !w.closing {
			w.cond.Wait()
		}
		if w.err != nil {
			w.mu.Unlock()
			return
		}
		if len(w.pending) == 0 { // closing, and everything written
			w.failLocked(ErrClosed)
			w.mu.Unlock()
			return
		}
		buf := w.pending
		w.pending = nil
		w.inflight = len(buf)
		w.mu.Unlock()

		err := w.writeAll(buf)

		w.mu.Lock()
		w.inflight = 0
		if cap(buf) <= maxRetain && w.err == nil {
			w.spare = buf[:0]
		}
		if err != nil && w.err == nil {
			if errors.Is(err, ErrWriteTimeout) {
				w.failLocked(ErrWriteTimeout)
				w.mu.Unlock()
				w.cutoff(ReasonWriteTimeout)
				return
			}
			w.failLocked(err)
		}
	}
}

// writeAll writes buf, renewing the deadline as long as each attempt makes
// progress, and returns ErrWriteTimeout when one makes none.
func (w *Writer) writeAll(buf []byte) error {
	for len(buf) > 0 {
		w.dlMu.Lock()
		if w.stopped {
			w.dlMu.Unlock()
			return ErrClosed
		}
		if w.opts.WriteTimeout > 0 {
			// Socket deadlines run on the runtime's wall clock; an
			// injected clock could not move them.
			w.conn.SetWriteDeadline(time.Now().Add(w.opts.WriteTimeout))
		}
		w.dlMu.Unlock()
		n, err := w.conn.Write(buf)
		buf = buf[n:]
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if n > 0 {
				continue // slow but reading: give it another period
			}
			return ErrWriteTimeout
		}
		return err
	}
	return nil
}
