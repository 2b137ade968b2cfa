//go:build !linux

package upstream

import (
	"context"

	"github.com/jobgate/jobgate/codec/beanstalk"

	"github.com/jobgate/jobgate/routing"
)

// CanLoop reports false: event-loop sessions need epoll.
func (b *Beanstalk) CanLoop() bool { return false }

// OpenLoop returns routing.ErrNoLoop: event-loop sessions need epoll.
func (b *Beanstalk) OpenLoop(context.Context, func(error)) (routing.BeanstalkLoopConn, error) {
	return nil, routing.ErrNoLoop
}

// shutdown is never called: there are no event-loop sessions here.
func (l *beanstalkLoopIO) shutdown(*beanstalkSession) {}

// flushLocked is never called: there are no event-loop sessions here.
func (l *beanstalkLoopIO) flushLocked() error { return nil }

// queueCommand is never called: there are no event-loop sessions here.
func (l *beanstalkLoopIO) queueCommand(*beanstalk.Command) {}

// beanstalkLoopIO is the event-loop side of a session; none here.
type beanstalkLoopIO struct{}
