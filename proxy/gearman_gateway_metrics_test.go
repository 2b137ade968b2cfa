package proxy_test

import (
	"io"
	"testing"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/routing"
)

// TestGearmanGatewayBreakerMetrics: a gateway built with metrics reports
// its backends' breaker transitions.
func TestGearmanGatewayBreakerMetrics(t *testing.T) {
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address = "g1", 1, config.TypeGearman, "127.0.0.1:1"
	b.Breaker = config.Breaker{Failures: 2, OpenTimeout: 3600e9, HalfOpenRequests: 1}
	c.Backends = append(c.Backends, b)
	c.Routes.Gearman = []config.Route{{Exact: "one", Backend: "g1"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Options{NoRuntimeCollectors: true})
	g, err := proxy.NewGearmanGatewayFromConfig(c, m)
	if err != nil {
		t.Fatal(err)
	}
	be := g.Rules.Match([]byte("one")).Owner([]byte("one"))
	if be.Breaker == nil {
		t.Fatal("no breaker")
	}
	fail := &routing.TransportError{Err: io.ErrUnexpectedEOF}
	be.Breaker.Record(fail)
	be.Breaker.Record(fail)
	if s := be.Breaker.State(); s != routing.BreakerOpen {
		t.Fatalf("breaker %v, want open", s)
	}
	checkSamples(t, scrapeMetrics(t, m), map[string]float64{
		`jobgate_breaker_state{backend="g1"}`:                         2,
		`jobgate_breaker_transitions_total{backend="g1",to="open"}`:   1,
		`jobgate_breaker_transitions_total{backend="g1",to="closed"}`: 0,
		`jobgate_backend_up{backend="g1"}`:                            1,
	})
}
