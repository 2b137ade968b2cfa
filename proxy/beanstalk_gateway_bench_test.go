package proxy_test

import (
	"testing"

	"github.com/jobgate/jobgate/internal/testutil"
)

// BenchmarkBeanstalkGatewayCycle runs put, reserve and delete through a
// gateway in front of the local engine and in front of a real beanstalkd,
// and against that beanstalkd directly, so the gateway's cost per command
// shows beside the upstream's own.
func BenchmarkBeanstalkGatewayCycle(b *testing.B) {
	b.Run("gateway-local", func(b *testing.B) {
		bsBenchCycle(b, bsStartGatewayLocal(b, 0).addr)
	})
	up := testutil.StartBeanstalkd(b)
	b.Run("gateway-beanstalkd", func(b *testing.B) {
		addr, _ := bsServeGateway(b, bsSingleGateway(b, up, 1), 0)
		bsBenchCycle(b, addr)
	})
	b.Run("beanstalkd", func(b *testing.B) {
		bsBenchCycle(b, up)
	})
}
