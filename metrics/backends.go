package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Breaker states as jobgate_breaker_state values. They are
// routing.BreakerState's numbering (a test keeps them in step), so the
// wiring can pass uint8(to) from routing.BreakerConfig.OnStateChange.
const (
	BreakerClosed    uint8 = 0
	BreakerHalfOpen  uint8 = 1
	BreakerOpen      uint8 = 2
	numBreakerStates       = 3
)

var breakerNames = [numBreakerStates]string{"closed", "half-open", "open"}

// BackendSeries are the series of one backend. Resolve them once per
// backend with Metrics.Backend and keep them.
type BackendSeries struct {
	up, breaker prometheus.Gauge
	transitions [numBreakerStates]prometheus.Counter
	latency     prometheus.Observer
}

// SetUp records the backend's health; wire it to routing.HealthConfig.OnChange.
func (b *BackendSeries) SetUp(up bool) {
	if up {
		b.up.Set(1)
	} else {
		b.up.Set(0)
	}
}

// SetBreakerState records a breaker state change to state (BreakerClosed,
// BreakerHalfOpen or BreakerOpen) and counts the transition. It is cheap
// and takes no lock, as routing.BreakerConfig.OnStateChange requires.
func (b *BackendSeries) SetBreakerState(state uint8) {
	if state >= numBreakerStates {
		return
	}
	b.breaker.Set(float64(state))
	b.transitions[state].Inc()
}

// ObserveLatency records one upstream round trip (request written to reply
// read).
func (b *BackendSeries) ObserveLatency(d time.Duration) { b.latency.Observe(d.Seconds()) }

type backendVecs struct {
	up, breaker *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	latency     *prometheus.HistogramVec
}

func (v *backendVecs) init(reg prometheus.Registerer) {
	v.up = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobgate_backend_up",
		Help: "1 when the backend's health checks pass, 0 when it is marked down.",
	}, []string{"backend"})
	v.breaker = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobgate_breaker_state",
		Help: "The backend's circuit breaker: 0 closed, 1 half-open, 2 open.",
	}, []string{"backend"})
	v.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobgate_breaker_transitions_total",
		Help: "Circuit breaker state changes by the state entered.",
	}, []string{"backend", "to"})
	v.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jobgate_upstream_latency_seconds",
		Help:    "Round trip of one request to an upstream backend.",
		Buckets: LatencyBuckets,
	}, []string{"backend"})
	reg.MustRegister(v.up, v.breaker, v.transitions, v.latency)
}

// Backend returns the series of the backend named name (its config name),
// creating them on the first call: up 1 and breaker closed, the states
// routing starts a backend in. Backends come from the config, so their
// number is bounded without a Limiter.
func (m *Metrics) Backend(name string) *BackendSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.backends[name]; ok {
		return b
	}
	v := &m.backendVec
	b := &BackendSeries{
		up:      v.up.WithLabelValues(name),
		breaker: v.breaker.WithLabelValues(name),
		latency: v.latency.WithLabelValues(name),
	}
	for s := range numBreakerStates {
		b.transitions[s] = v.transitions.WithLabelValues(name, breakerNames[s])
	}
	b.up.Set(1)
	m.backends[name] = b
	return b
}
