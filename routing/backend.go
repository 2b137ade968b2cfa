package routing

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/codec/gearman"
)

// LocalID is the id of the local backend (the in-process engines). Its ids
// and handles are never rewritten.
const LocalID = 0

// MaxBackendID is the largest backend id: ids are encoded in BackendIDBits
// bits of client-visible job ids.
const MaxBackendID = 1<<BackendIDBits - 1

// Errors a backend session reports. Transport failures come wrapped in a
// *TransportError; protocol answers (NOT_FOUND, ERROR packets) are replies,
// never errors.
var (
	// ErrClosed: the session was closed by its owner (Close) before the
	// request was answered.
	ErrClosed = errors.New("routing: backend session closed")
	// ErrUnavailable: the backend's breaker is open or its health check
	// says it is down; nothing was sent.
	ErrUnavailable = errors.New("routing: backend unavailable")
	// ErrTimeout: a request expecting an immediate answer got none within
	// the backend's I/O timeout. It comes inside a *TransportError.
	ErrTimeout = errors.New("routing: backend did not answer in time")
)

// TransportError is a failure to talk to a backend: a dial error, a timeout,
// a broken or closed connection, a stream that is out of sync. It ends the
// backend session; the client's request gets INTERNAL_ERROR (Beanstalk) or
// an ERROR packet (Gearman), and the Breaker counts it.
type TransportError struct {
	// Backend names the backend, usually its address.
	Backend string
	// Op is what failed: "dial", "write", "read".
	Op string
	// Err is the cause.
	Err error
}

// Error describes the failure in one line.
func (e *TransportError) Error() string {
	return "routing: " + e.Op + " " + e.Backend + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// IsTransport reports whether err is a transport failure that a Breaker
// counts: a *TransportError, a net.Error, a reset or refused connection,
// an unexpected EOF, a deadline. Protocol answers, ErrClosed (our own Close),
// ErrUnavailable (our own refusal) and context cancellation (the client went
// away) are not: none of them says the backend is unwell.
func IsTransport(err error) bool {
	if err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrUnavailable) ||
		errors.Is(err, context.Canceled) {
		return false
	}
	var te *TransportError
	var ne net.Error
	return errors.As(err, &te) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, ErrTimeout)
}

// GearmanEvents receives what a Gearman backend session sends. The
// functions are never called concurrently for one session, and in the order
// the backend sent things, but not necessarily from one goroutine (an
// upstream session calls them from its reader or, for a GearmanLoopConn,
// from the event loop serving it; the local engine from
// whichever session caused the packet, under its lock). So they must not
// block (encode at once or hand over to another goroutine) and must not call
// back into the session (Send, Flush, Close).
type GearmanEvents struct {
	// Packet receives every packet from the backend: the replies to the
	// session's requests in request order (JOB_CREATED, ECHO_RES,
	// STATUS_RES, OPTION_RES, NO_JOB, JOB_ASSIGN*, ERROR) and the async
	// ones (NOOP, WORK_*). p, its Args and their bytes are valid only until
	// Packet returns: copy (Packet.Clone) or encode what must outlive it.
	Packet func(p *gearman.Packet)
	// Closed is called once when the session ends by itself (connection
	// lost, I/O timeout, garbage from the backend), after the last Packet,
	// with a *TransportError. It is not called after Close. May be nil.
	Closed func(err error)
	// Idle, when set, is called after a Packet when no further whole
	// packet is buffered: the moment to flush what the packets delivered
	// so far produced, once per batch rather than once per packet.
	Idle func()
}

// GearmanBackend opens Gearman sessions: one per client session that
// touches the backend (DESIGN decision 2), because a worker's registered
// functions, a client's foreground jobs and the async packets for them belong
// to a connection.
type GearmanBackend interface {
	// Open starts a session whose packets go to ev. ctx bounds the dial
	// only, not the session. A failure is a *TransportError.
	Open(ctx context.Context, ev GearmanEvents) (GearmanConn, error)
}

// GearmanConn is one open Gearman backend session.
//
// Send and Flush may be called from any goroutine, but a caller that wants
// its requests answered in order sends them from one goroutine (the client
// session's read loop), as it does anyway to keep DESIGN decision 4.
type GearmanConn interface {
	// Send queues one request packet (Magic gearman.Req) for the backend.
	// p is not retained after Send returns, so it may alias the client's
	// read buffer. Packets are buffered until Flush (one too large for the
	// buffer may be written at once). The error is one wrapping
	// gearman.ErrInvalidPacket for a packet that does not match its type
	// (nothing sent, the session goes on), else the session is gone: a
	// *TransportError or ErrClosed.
	Send(p *gearman.Packet) error
	// Flush writes the queued packets. Call it when the client's reader
	// has nothing more buffered, so that pipelined requests share a write.
	Flush() error
	// Close ends the session without calling Closed. The backend sees the
	// connection close (its jobs are requeued as for any client). A Packet
	// being delivered concurrently may still complete.
	Close()
}

// BeanstalkBackend opens Beanstalk sessions: one per client session that
// touches the backend (DESIGN decision 2), because the used tube, the
// watch list and reservations belong to a connection.
type BeanstalkBackend interface {
	// Open starts a session. closed (may be nil) is called once when the
	// session ends by itself, after every pending done, with a
	// *TransportError; not after Close. ctx bounds the dial only.
	Open(ctx context.Context, closed func(err error)) (BeanstalkConn, error)
}

// BeanstalkConn is one open Beanstalk backend session. Its methods are
// called by one client session, not concurrently with each other.
type BeanstalkConn interface {
	// Do sends cmd and calls done exactly once with its reply, in the
	// order of the Do calls (pipelining: Do does not wait for the reply).
	// cmd is not retained after Do returns. done may run before Do returns
	// (local backends answer at once, and a dead session fails at once) or
	// later on the session's goroutine; it must not block. r and its Tube
	// and Body are valid only until done returns.
	//
	// err is non-nil when no reply came: a *TransportError (the client
	// gets INTERNAL_ERROR), ErrClosed, or a *beanstalk.ReplyTooBigError
	// (the backend's reply body exceeded the limits; for RESERVED the job
	// stays reserved by this session and the error's ID names it).
	//
	// reserve and reserve-with-timeout may stay pending for long; while one
	// is pending only Cancel and Close may be called. Sending quit is not
	// allowed: Close the session instead.
	Do(cmd *beanstalk.Command, done func(r *beanstalk.Reply, err error))
	// Flush writes what Do queued; call it when the client's reader has
	// nothing more buffered.
	Flush() error
	// Cancel ends a pending reserve: unless its done has already been
	// called or is being called, done is called with TIMED_OUT before
	// Cancel returns. A job the backend hands out after that is put back to
	// ready by the session, with its priority and no delay, so no job is
	// stolen. A reserve that had already won (done with RESERVED, possibly
	// concurrently with Cancel) is the caller's: it releases the job if it
	// does not want it. After Cancel, Do may be called again. Without a
	// pending reserve Cancel does nothing.
	Cancel()
	// Close ends the session: every pending done is called with ErrClosed,
	// closed is not called, and the backend returns this session's
	// reservations to ready (it sees the connection close).
	Close()
}

// Backend is one server a Pool routes to: the local engines (ID LocalID) or
// an upstream. Build it once per configured backend and protocol and share
// the pointer; its fields must not change after it is put in a Pool.
type Backend struct {
	// ID is the backend's id from the configuration, 0 to MaxBackendID,
	// stable for as long as any job exists: it is encoded in client-visible
	// ids and handles, and it seeds the shard hash, so a backend keeps its
	// names when others are added or moved to a new address.
	ID int
	// Name names the backend in logs and metrics.
	Name string
	// Gearman opens Gearman sessions; nil for a Beanstalk backend.
	Gearman GearmanBackend
	// Beanstalk opens Beanstalk sessions; nil for a Gearman backend.
	Beanstalk BeanstalkBackend
	// Breaker, when not nil, refuses sessions while open and counts their
	// transport failures. The local backend has none.
	Breaker *Breaker
	// Health, when not nil, marks the backend down between failed probes.
	Health *Health
}

// Available reports whether the backend should be tried now: its breaker is
// not open and its health check, if any, says up. It allocates nothing.
func (b *Backend) Available() bool {
	return (b.Breaker == nil || b.Breaker.Ready()) && (b.Health == nil || b.Health.Up())
}

// OpenGearman opens a Gearman session through the breaker: refused with
// ErrUnavailable while the breaker is open, and the dial's outcome and a
// later loss of the session (Closed) are counted.
func (b *Backend) OpenGearman(ctx context.Context, ev GearmanEvents) (GearmanConn, error) {
	if b.Gearman == nil {
		return nil, errors.New("routing: backend " + b.Name + " does not serve Gearman")
	}
	done, err := b.Breaker.allow()
	if err != nil {
		return nil, err
	}
	ev.Closed = b.recordingEnd(ev.Closed)
	c, err := b.Gearman.Open(ctx, ev)
	done(err)
	return c, err
}

// recordingEnd returns closed made to record a session's end (a broken
// connection counts as a failure) in b's breaker first, if b has one.
func (b *Backend) recordingEnd(closed func(error)) func(error) {
	if b.Breaker == nil {
		return closed
	}
	return func(err error) {
		b.Breaker.Record(err)
		if closed != nil {
			closed(err)
		}
	}
}

// OpenBeanstalk opens a Beanstalk session through the breaker, as
// OpenGearman does.
func (b *Backend) OpenBeanstalk(ctx context.Context, closed func(error)) (BeanstalkConn, error) {
	if b.Beanstalk == nil {
		return nil, errors.New("routing: backend " + b.Name + " does not serve Beanstalk")
	}
	done, err := b.Breaker.allow()
	if err != nil {
		return nil, err
	}
	closed = b.recordingEnd(closed)
	c, err := b.Beanstalk.Open(ctx, closed)
	done(err)
	return c, err
}
