package proxy

import (
	"net"
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil/authtest"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/metrics"
)

// BenchmarkGearmanServerForeground runs foreground jobs one at a time
// through a real server on loopback: submit, grab, complete, with the
// client and the worker in the benchmark goroutine. allocs/op counts the
// whole process, the server's share included. Profile the server with
// -cpuprofile. ns/op is a latency, mostly the kernel's loopback TCP and
// thread wakeups; it does not rank the two modes, since with client and
// server in one process the goroutine mode can hand each packet over
// without waking another thread, which separate processes cannot.
func BenchmarkGearmanServerForeground(b *testing.B) {
	for _, mode := range []struct {
		name                string
		goroutines, metrics bool
		auth                bool
	}{{"loop", false, false, false}, {"goroutines", true, false, false}, {"loop-metrics", false, true, false}, {"loop-auth", false, false, true}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := GearmanConfig{Engine: gearmanConfigForTest(), Goroutines: mode.goroutines}
			if mode.auth {
				// Auth must not add allocations to the loop's 0 either.
				cfg.Auth = authtest.Policy(b, benchAuthConfig)
			}
			if mode.metrics {
				// Metrics must not add allocations to the loop's 0.
				cfg.Metrics = metrics.New(metrics.Options{NoRuntimeCollectors: true})
			}
			runForegroundBench(b, startJobgateGearmanServer(b, cfg))
		})
	}
}

// BenchmarkGearmanServerBackgroundSubmit measures background submits per
// second through the event-loop server with each journal policy, and
// without a journal: 16 clients on their own connections, each waiting
// for its JOB_CREATED before the next submit. Under Always each
// JOB_CREATED waits for an fsync, shared by the submits that arrive
// meanwhile (group commit). No speed is asserted; compare the jobs/s.
func BenchmarkGearmanServerBackgroundSubmit(b *testing.B) {
	policies := []struct {
		name string
		sync *journal.SyncPolicy
	}{
		{"memory", nil},
		{"never", &journal.Never},
		{"interval", ptr(journal.Interval(0))},
		{"always", &journal.Always},
	}
	for _, pol := range policies {
		b.Run(pol.name, func(b *testing.B) {
			cfg := gearmanConfigForTest()
			if pol.sync != nil {
				cfg.Journal = openTestJournal(b, b.TempDir(), *pol.sync)
			}
			addr := startJobgateGearmanServer(b, GearmanConfig{Engine: cfg})
			submit := codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte("bench"), nil, make([]byte, 100))
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer nc.Close()
				r := codec.NewReader(nc, codec.Limits{})
				for pb.Next() {
					nc.Write(submit)
					if f, err := r.ReadFrame(); err != nil || f.Packet.Type != codec.JobCreated {
						b.Errorf("submit: %v %v", f.String(), err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

func ptr[T any](v T) *T { return &v }
