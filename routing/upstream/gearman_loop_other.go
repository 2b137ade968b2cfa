//go:build !linux

package upstream

import (
	"context"

	"github.com/jobgate/jobgate/routing"
)

var _ routing.GearmanLoopBackend = (*Gearman)(nil)

// CanLoop reports false: event-loop sessions need epoll.
func (g *Gearman) CanLoop() bool { return false }

// OpenLoop returns routing.ErrNoLoop: event-loop sessions need epoll.
func (g *Gearman) OpenLoop(context.Context, routing.GearmanEvents, func() int) (routing.GearmanLoopConn, error) {
	return nil, routing.ErrNoLoop
}
