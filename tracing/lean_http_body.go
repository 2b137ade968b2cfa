package tracing

import (
	"context"
	"errors"
	"io"
	"sync"
)

// sentBody is one attempt's request body over a buffer the export
// goroutine reuses for the next batch (the encoder's output, or the gzip
// output). net/http may go on reading a request body after Do returns,
// when the receiver answers before reading it all (413, 401, 503, 400),
// and closes it when it is done, even on errors. post waits for that
// close, bounded by the attempt's context, and release then fences the
// buffer off: a read the transport would still make, or a body it asks
// for again (GetBody, to resend on a fresh connection), fails instead of
// reading bytes the next batch overwrites.
type sentBody struct {
	mu       sync.Mutex
	buf      []byte
	open     int  // readers handed out and not closed
	released bool // buf is no longer ours to read
	changed  chan struct{}
}

// errBodyReleased fails a transport's read after the upload returned.
var errBodyReleased = errors.New("tracing: request body read after its upload returned")

func newSentBody(buf []byte) *sentBody {
	return &sentBody{buf: buf, changed: make(chan struct{}, 1)}
}

// reader returns a new reader from the start of the buffer: the request's
// Body, and its GetBody.
func (s *sentBody) reader() (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil, errBodyReleased
	}
	s.open++
	return &sentReader{b: s}, nil
}

// release waits until the transport closed every reader it was given, or
// ctx ends, and then keeps any reader from touching the buffer again.
func (s *sentBody) release(ctx context.Context) {
	for {
		s.mu.Lock()
		if s.open == 0 || ctx.Err() != nil {
			s.released = true
			s.buf = nil
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		select {
		case <-s.changed:
		case <-ctx.Done():
		}
	}
}

// sentReader is one reader of a sentBody. Reads hold the body's lock, so
// release returns only once no read is copying from the buffer.
type sentReader struct {
	b      *sentBody
	off    int
	closed bool
}

func (r *sentReader) Read(p []byte) (int, error) {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	if r.b.released || r.closed {
		return 0, errBodyReleased
	}
	if r.off >= len(r.b.buf) {
		return 0, io.EOF
	}
	n := copy(p, r.b.buf[r.off:])
	r.off += n
	return n, nil
}

func (r *sentReader) Close() error {
	r.b.mu.Lock()
	if !r.closed {
		r.closed = true
		r.b.open--
	}
	r.b.mu.Unlock()
	select {
	case r.b.changed <- struct{}{}:
	default:
	}
	return nil
}
