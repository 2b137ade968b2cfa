//go:build !linux

package upstream

import (
	"testing"

	"github.com/jobgate/jobgate/routing"
)

// openBeanstalkLoop is never called: onLoop stays false without epoll.
func openBeanstalkLoop(t *testing.T, _ *Beanstalk, _ chan error) routing.BeanstalkConn {
	t.Fatal("no event-loop sessions on this platform")
	return nil
}
