package proxy_test

import (
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
)

// startBeanstalkMetrics runs a server with metrics and a fake clock, so
// queue wait and run time are exact.
func startBeanstalkMetrics(t *testing.T) (*proxy.BeanstalkServer, *metrics.Metrics, *clock.Fake, string) {
	t.Helper()
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	addr, srv := bsServe(t, proxy.BeanstalkConfig{
		EngineConfig: engine.Config{Clock: clk},
		Metrics:      m,
	})
	return srv, m, clk, addr
}

// TestBeanstalkMetrics runs a scripted workload and checks the exact
// series it leaves.
func TestBeanstalkMetrics(t *testing.T) { bsBothPaths(t, testBeanstalkMetrics) }

func testBeanstalkMetrics(t *testing.T) {
	_, m, clk, addr := startBeanstalkMetrics(t)
	c := bsDial(t, addr)
	step := func(send, want string) {
		t.Helper()
		c.send(t, send)
		c.expect(t, want, send)
	}
	step("use emails\r\n", "USING emails\r\n")
	step("put 0 0 60 1\r\na\r\n", "INSERTED 1\r\n")
	step("put 0 0 60 1\r\nb\r\n", "INSERTED 2\r\n")
	step("put 0 0 60 1\r\nc\r\n", "INSERTED 3\r\n")
	step("put 0 100 60 1\r\nd\r\n", "INSERTED 4\r\n")
	step("watch emails\r\n", "WATCHING 2\r\n")
	clk.Advance(2 * time.Second)
	step("reserve\r\n", "RESERVED 1 1\r\na\r\n")
	clk.Advance(3 * time.Second)
	step("delete 1\r\n", "DELETED\r\n")
	step("reserve-with-timeout 0\r\n", "RESERVED 2 1\r\nb\r\n")
	clk.Advance(time.Second)
	step("bury 2 0\r\n", "BURIED\r\n")
	step("reserve-with-timeout 0\r\n", "RESERVED 3 1\r\nc\r\n")
	step("delete 99\r\n", "NOT_FOUND\r\n")
	step("put x\r\n", "BAD_FORMAT\r\n")
	step("frobnicate\r\n", "UNKNOWN_COMMAND\r\n")
	step("put 0 0 60 1\r\nabc\r\n", "EXPECTED_CRLF\r\n")
	c.nc.Close()
	c2 := bsDial(t, addr) // a second, still open connection
	defer c2.nc.Close()
	c2.send(t, "list-tube-used\r\n")
	c2.expect(t, "USING default\r\n", "list-tube-used")

	bs := func(cmd, res string) string {
		return `jobgate_commands_total{command="` + cmd + `",protocol="beanstalk",result="` + res + `"}`
	}
	tube := `{name="emails",protocol="beanstalk"}`
	depth := func(state string) string {
		return `jobgate_queue_depth{name="emails",protocol="beanstalk",state="` + state + `"}`
	}
	// The first connection's close returned job 3 to ready; wait for the
	// server to see it go.
	deadline := time.Now().Add(5 * time.Second)
	for scrapeMetrics(t, m)[`jobgate_connections{protocol="beanstalk"}`] != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	checkSamples(t, scrapeMetrics(t, m), map[string]float64{
		bs("use", "ok"):                           1,
		bs("put", "ok"):                           4,
		bs("put", "client_error"):                 1, // EXPECTED_CRLF
		bs("unknown", "client_error"):             3, // BAD_FORMAT, UNKNOWN_COMMAND, and the "bc" left after EXPECTED_CRLF
		bs("watch", "ok"):                         1,
		bs("reserve", "ok"):                       1,
		bs("reserve-with-timeout", "ok"):          2,
		bs("delete", "ok"):                        1,
		bs("delete", "miss"):                      1,
		bs("bury", "ok"):                          1,
		bs("list-tube-used", "ok"):                1,
		"jobgate_jobs_submitted_total" + tube:     4,
		"jobgate_jobs_completed_total" + tube:     1,
		"jobgate_jobs_failed_total" + tube:        1,
		"jobgate_queue_wait_seconds_count" + tube: 3,
		// 2s for job 1, 5s for job 2, 6s for job 3.
		"jobgate_queue_wait_seconds_sum" + tube: 13,
		"jobgate_job_run_seconds_count" + tube:  2,
		"jobgate_job_run_seconds_sum" + tube:    4, // 3s + 1s
		depth("ready"):                          1, // job 3, back from the closed connection
		depth("reserved"):                       0,
		depth("delayed"):                        1,
		depth("buried"):                         1,
		`jobgate_queue_depth{name="default",protocol="beanstalk",state="ready"}`: 0,
		`jobgate_connections{protocol="beanstalk"}`:                              1,
		`jobgate_connections_accepted_total{protocol="beanstalk"}`:               2,
	})
}

// TestBeanstalkMetricsAllocs: with metrics on, a put/reserve/delete cycle
// through a session costs no more allocations than without (the job and
// its body, which put must make); the metrics add none.
func TestBeanstalkMetricsAllocs(t *testing.T) {
	cycle := func(withMetrics bool) float64 {
		eng, err := engine.New(engine.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		if withMetrics {
			m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
			// Through the server constructor, which wires the observer.
			if _, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{Engine: eng, Metrics: m}); err != nil {
				t.Fatal(err)
			}
		}
		sess := eng.NewSession(nil)
		defer sess.Close()
		var r wire.Reply
		put := &wire.Command{Verb: wire.Put, TTR: 60, Body: []byte("x")}
		res := &wire.Command{Verb: wire.ReserveWithTimeout}
		del := &wire.Command{Verb: wire.Delete}
		run := func() {
			sess.Exec(put, &r)
			sess.Exec(res, &r)
			del.ID = r.ID
			sess.Exec(del, &r)
			if r.Kind != wire.Deleted {
				t.Fatalf("delete: %v", r.Kind)
			}
		}
		run() // admit the tube's series
		return testing.AllocsPerRun(200, run)
	}
	without, with := cycle(false), cycle(true)
	if with != without {
		t.Errorf("allocs per put/reserve/delete: %v with metrics, %v without", with, without)
	}
}
