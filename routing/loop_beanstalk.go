package routing

import (
	"context"
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
	LoopSession
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
	closed = b.recordingEnd(closed)
	c, err := lb.OpenLoop(ctx, closed)
	done(err)
	return c, err
}
