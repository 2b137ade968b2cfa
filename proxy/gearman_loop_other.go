//go:build !linux

package proxy

import (
	"errors"

	"github.com/jobgate/jobgate/routing"
)

// gearmanLoop is the Linux epoll event loop (gearman_loop_linux.go); here
// every connection is served by its own goroutines.
type gearmanLoop struct{}

func startGearmanLoop(*GearmanServer) (*gearmanLoop, error) {
	return nil, errors.New("no event loop on this platform")
}

// loopOnce is a loop connection's read state (epoll.Once on Linux).
type loopOnce struct{}

func (l *gearmanLoop) adopt(*gearmanConn) bool { return false }
func (l *gearmanLoop) add(*gearmanConn)        {}
func (l *gearmanLoop) markDirty(*gearmanConn)  {}
func (l *gearmanLoop) kick()                   {}
func (l *gearmanLoop) stop()                   {}
func (c *gearmanConn) closeFD()                {}

func (l *gearmanLoop) attach(routing.GearmanLoopConn) {}
func (l *gearmanLoop) resume(*gearmanConn, error)     {}
