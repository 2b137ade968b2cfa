package proxy

import (
	"runtime"
	"testing"

	"github.com/jobgate/jobgate/internal/epoll"
)

// TestGearmanLoopParkedAlways runs Gearman server tests with the loop
// parked on the netpoller although a second P is idle (loop_wait: park):
// concurrent clients and workers, packets other connections cause, and
// the gearman CLI as client and worker.
func TestGearmanLoopParkedAlways(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	epoll.SetParkAlways(true)
	defer epoll.SetParkAlways(false)
	t.Run("ConcurrentClientsAndWorkers", TestGearmanConcurrentClientsAndWorkers)
	t.Run("AsyncDelivery", TestGearmanAsyncDelivery)
	t.Run("CLIInterop", TestGearmanCLIInterop)
}
