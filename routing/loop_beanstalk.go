package routing

import (
	"context"
	"time"
)

// BeanstalkLoopBackend is implemented by Beanstalk backends that can serve
// a session on the caller's event loop instead of a reader goroutine of
// their own, as GearmanLoopBackend does for Gearman.
type BeanstalkLoopBackend interface {
	// CanLoop reports whether OpenLoop can serve this backend (not over
	// TLS, on a platform with epoll).
	CanLoop() bool
	// OpenLoop connects (blocking: call it off the loop) and returns a
	// session with no goroutine of its own: the dones of its Do calls and
	// closed run on the loop goroutine, from Ready (or at once, from the
	// caller, for a session that has ended, and from Cancel). ErrNoLoop
	// when this backend cannot; other errors as Open's.
	OpenLoop(ctx context.Context, closed func(error)) (BeanstalkLoopConn, error)
}

// BeanstalkLoopConn is a Beanstalk backend session served by an event
// loop. Do, Flush, Cancel and Close may be called from any goroutine (one
// at a time, as for BeanstalkConn); Flush writes what the socket takes
// without waiting and leaves the rest for Ready. Attach, Ready, Expire and
// Detach belong to the loop goroutine; the socket's life is as for
// GearmanLoopConn.
type BeanstalkLoopConn interface {
	BeanstalkConn
	// Attach registers the socket with p under id. An error means the
	// session is gone: the loop forgets it.
	Attach(p Poller, id int32) error
	// Ready handles the events epoll reported: writes waiting output,
	// reads once and delivers every whole reply, or reports the end
	// (closed, unless Close ended it). It returns false when the session
	// is over and its socket released.
	Ready(events uint32) bool
	// Expire fails the session if a reply or a write is overdue at now.
	Expire(now time.Time)
	// Timed reports whether Expire can ever fail the session.
	Timed() bool
	// Backlog returns how many bytes wait for the backend to read them.
	Backlog() int
	// Detach releases the socket without reporting anything, for a loop
	// that is shutting down. Close first.
	Detach()
}

// CanLoopBeanstalk reports whether b can serve Beanstalk event-loop
// sessions.
func (b *Backend) CanLoopBeanstalk() bool {
	lb, ok := b.Beanstalk.(BeanstalkLoopBackend)
	return ok && lb.CanLoop()
}

// OpenBeanstalkLoop opens an event-loop session through the breaker, as
// OpenBeanstalk does; ErrNoLoop when the backend cannot serve one.
func (b *Backend) OpenBeanstalkLoop(ctx context.Context, closed func(error)) (BeanstalkLoopConn, error) {
	lb, ok := b.Beanstalk.(BeanstalkLoopBackend)
	if !ok || !lb.CanLoop() {
		return nil, ErrNoLoop
	}
	done, err := b.Breaker.allow()
	if err != nil {
		return nil, err
	}
	if b.Breaker != nil {
		inner := closed
		closed = func(err error) {
			b.Breaker.Record(err)
			if inner != nil {
				inner(err)
			}
		}
	}
	c, err := lb.OpenLoop(ctx, closed)
	done(err)
	return c, err
}
