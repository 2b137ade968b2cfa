//go:build !linux

package proxy

import "github.com/jobgate/jobgate/routing"

// bgwLoop is the Linux gateway event loop (beanstalk_gateway_loop_linux.go);
// here every gateway connection is served by its own goroutine.
type bgwLoop struct{}

// bgwLoopConn is a gateway connection served by the event loop; none here
// (the fields the shared code reads, never set).
type bgwLoopConn struct {
	off, eof bool
	out      []byte
}

func (b *bgwLoopConn) attach(routing.BeanstalkLoopConn) {}

// deferFlush: no event loop here, so flushBackends writes at once.
func (s *bgwSession) deferFlush(routing.LoopSession) bool { return false }

func (s *BeanstalkServer) serveGatewayOnLoop(*beanstalkConn) bool { return false }
func (s *BeanstalkServer) stopGatewayLoop()                       {}
