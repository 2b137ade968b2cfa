//go:build !linux

package proxy

import "time"

// beanstalkLoop is the Linux epoll event loop (beanstalk_loop_linux.go);
// here every connection is served by its own goroutine.
type beanstalkLoop struct{}

// bloopConn is a connection served by the event loop; none here.
type bloopConn struct{}

func (s *BeanstalkServer) serveOnLoop(*beanstalkConn) bool { return false }
func (s *BeanstalkServer) stopLoop()                       {}
func (c *beanstalkConn) deferHold(time.Duration) bool      { return false }
