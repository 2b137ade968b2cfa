package proxy_test

import (
	"runtime"
	"testing"

	"github.com/jobgate/jobgate/internal/epoll"
)

// TestBeanstalkLoopParkedAlways runs Beanstalk loop tests with the loop
// parked on the netpoller although a second P is idle (loop_wait: park):
// pipelined commands behind a waiting reserve, a half-close during one,
// a slow reader, bodies in pieces.
func TestBeanstalkLoopParkedAlways(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	epoll.SetParkAlways(true)
	defer epoll.SetParkAlways(false)
	t.Run("PipelinedBehindReserve", TestBeanstalkLoopPipelinedBehindReserve)
	t.Run("HalfCloseDuringReserve", TestBeanstalkLoopHalfCloseDuringReserve)
	t.Run("SlowReader", TestBeanstalkLoopSlowReader)
	t.Run("BodyInPieces", TestBeanstalkLoopBodyInPieces)
}
