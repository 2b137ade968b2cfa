package routing

import (
	"context"
	"errors"
	"time"
)

// ErrNoLoop: the backend cannot serve a session on the caller's event loop
// (a TLS upstream, the local engine, a platform without epoll). The caller
// opens an ordinary session instead.
var ErrNoLoop = errors.New("routing: backend has no event-loop sessions")

// Poller is the part of an event loop (internal/epoll.Poller) a loop
// session needs: it registers its own socket, changes the events it waits
// for (readable, and writable while output waits for room) and removes it
// when it ends. Events and ids are epoll's.
type Poller interface {
	// Add watches fd for events; id comes back with them.
	Add(fd int, events uint32, id int32) error
	// Mod changes the events watched for fd.
	Mod(fd int, events uint32, id int32) error
	// Del stops watching fd.
	Del(fd int) error
}

// IOBatch is the part of an event loop's batch of socket calls
// (internal/uring.Batch) a loop session queues its own read or write in,
// for the loop to make them all with one system call. Read and Write
// return the operation's index for Result; Result is valid once the loop
// has run the batch.
type IOBatch interface {
	Read(fd int, p []byte) int
	Write(fd int, p []byte) int
	Result(i int) (int, error)
}

// GearmanLoopBackend is implemented by Gearman backends that can serve a
// session on the caller's event loop instead of a reader goroutine of their
// own: one goroutine then serves a client's socket and its upstream
// sockets, with no hand-off between them.
type GearmanLoopBackend interface {
	// CanLoop reports whether OpenLoop can serve this backend (not over
	// TLS, on a platform with epoll).
	CanLoop() bool
	// OpenLoop connects (blocking: call it off the loop) and returns a
	// session with no goroutine of its own; ev's callbacks run on the loop
	// goroutine, from Ready. maxPending, when not nil, returns the bound
	// on the bytes that may wait for the backend to read them (0: none);
	// it is called when output waits, so a limit changed later applies. A
	// Send finding more waiting, after trying to write them, fails the
	// session. The bound is on what waits before the request, so one
	// request larger than it still goes.
	// ErrNoLoop when this backend cannot; other errors as Open's.
	OpenLoop(ctx context.Context, ev GearmanEvents, maxPending func() int) (GearmanLoopConn, error)
}

// GearmanLoopConn is a Gearman backend session served by an event loop.
// Send, Flush and Close may be called from any goroutine; Flush writes
// what the socket takes without waiting and leaves the rest for Ready.
// Attach, Ready, Expire and Detach belong to the loop goroutine.
//
// The session never closes its socket behind the loop's back: when it
// fails or is closed it shuts the socket down, the loop sees the socket
// ready, and Ready reports the end (once: Closed, unless Close ended it)
// and removes the socket from the poller.
type GearmanLoopConn interface {
	GearmanConn
	LoopSession
}

// LoopSession is the part of an upstream session (GearmanLoopConn,
// BeanstalkLoopConn) that the event loop serving it drives.
type LoopSession interface {
	// Attach registers the socket with p under id. An error (the session
	// already ended) means the session is gone: the loop forgets it.
	Attach(p Poller, id int32) error
	// Ready handles the events epoll reported: writes waiting output,
	// reads once and delivers every whole reply (Gearman: ev.Packet, then
	// ev.Idle; Beanstalk: the dones of its Do calls), or reports the end.
	// It returns false when the session is over and its socket released.
	Ready(events uint32) bool
	// ReadInto queues in b the read Ready makes when epoll reports input,
	// so that the loop makes it with its other sockets' reads; the next
	// Ready takes what it brought instead of reading. False: nothing was
	// queued, and Ready reads itself.
	ReadInto(b IOBatch) bool
	// WriteInto queues in b a write of the output waiting, as Flush
	// makes it, so that the loop makes it with its other writes; false
	// when there is none to make (nothing waits, or it waits for room).
	// Once b has run the loop calls Wrote, which takes the result. Until
	// then a Flush from any goroutine leaves what it finds to Wrote, so
	// the bytes go out in order.
	WriteInto(b IOBatch) bool
	// Wrote finishes the write WriteInto queued: what the socket did not
	// take waits for room (Ready), and what was queued meanwhile is
	// written.
	Wrote()
	// Expire fails the session if a reply or a write is overdue at now
	// (the backend's I/O timeout); the loop calls it from its sweep.
	Expire(now time.Time)
	// Timed reports whether Expire can ever fail the session (the backend
	// has an I/O timeout): a loop with no such session need not sweep.
	Timed() bool
	// Backlog returns how many bytes wait for the backend to read them:
	// the loop stops reading a client whose sessions have too many.
	Backlog() int
	// Detach releases the socket without reporting anything, for a loop
	// that is shutting down. Close first.
	Detach()
}

// CanLoop reports whether b can serve event-loop sessions.
func (b *Backend) CanLoop() bool {
	lb, ok := b.Gearman.(GearmanLoopBackend)
	return ok && lb.CanLoop()
}

// OpenGearmanLoop opens an event-loop session through the breaker, as
// OpenGearman does; ErrNoLoop when the backend cannot serve one.
func (b *Backend) OpenGearmanLoop(ctx context.Context, ev GearmanEvents, maxPending func() int) (GearmanLoopConn, error) {
	lb, ok := b.Gearman.(GearmanLoopBackend)
	if !ok || !lb.CanLoop() {
		return nil, ErrNoLoop
	}
	done, err := b.Breaker.allow()
	if err != nil {
		return nil, err
	}
	ev.Closed = b.recordingEnd(ev.Closed)
	c, err := lb.OpenLoop(ctx, ev, maxPending)
	done(err)
	return c, err
}
