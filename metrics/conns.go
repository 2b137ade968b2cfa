package metrics

import "github.com/prometheus/client_golang/prometheus"

// Reasons a connection is refused at accept (jobgate_connections_rejected_total)
// or cut off later (jobgate_connections_cut_total). proxy/connlimit's
// Reason.String values are these.
const (
	ReasonMaxConnections = "max_connections"
	ReasonMaxPerIP       = "max_connections_per_ip"
	ReasonIdle           = "idle_timeout"
	ReasonReadTimeout    = "read_timeout"
	ReasonWriteTimeout   = "write_timeout"
	ReasonSlowReader     = "slow_reader"
	// ReasonMaxHandshakes: a TLS listener had limits.max_handshakes
	// handshakes in progress already.
	ReasonMaxHandshakes = "max_handshakes"
	// ReasonOther is where an unlisted reason is counted, keeping the
	// label set fixed.
	ReasonOther = "other"
)

var (
	rejectReasons = []string{ReasonMaxConnections, ReasonMaxPerIP, ReasonMaxHandshakes, ReasonOther}
	cutReasons    = []string{ReasonIdle, ReasonReadTimeout, ReasonWriteTimeout, ReasonSlowReader, ReasonOther}
)

// ConnSeries are the connection series of one protocol. Every series is
// created up front (the label sets are small and fixed), so each method is
// a single atomic operation plus, for the reasons, a lookup in a small
// immutable map.
type ConnSeries struct {
	open     prometheus.Gauge
	accepted prometheus.Counter
	rejected map[string]prometheus.Counter
	cut      map[string]prometheus.Counter
	// tlsFailed counts failed TLS handshakes by reason (metrics/tls.go).
	tlsFailed map[string]prometheus.Counter
}

// Opened records an accepted connection.
func (c *ConnSeries) Opened() {
	c.accepted.Inc()
	c.open.Inc()
}

// Closed records the end of a connection that Opened counted.
func (c *ConnSeries) Closed() { c.open.Dec() }

// Rejected counts a connection refused at accept for reason
// (ReasonMaxConnections, ReasonMaxPerIP). It was never Opened.
func (c *ConnSeries) Rejected(reason string) { pick(c.rejected, reason).Inc() }

// Cut counts a connection closed by a limit (ReasonIdle,
// ReasonReadTimeout, ReasonWriteTimeout, ReasonSlowReader). Closed is
// still to be called when it goes.
func (c *ConnSeries) Cut(reason string) { pick(c.cut, reason).Inc() }

func pick(m map[string]prometheus.Counter, reason string) prometheus.Counter {
	if c, ok := m[reason]; ok {
		return c
	}
	return m[ReasonOther]
}

func newConnSeries(reg prometheus.Registerer) (out [numProtocols]*ConnSeries) {
	open := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobgate_connections",
		Help: "Open client connections.",
	}, []string{"protocol"})
	accepted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobgate_connections_accepted_total",
		Help: "Client connections accepted.",
	}, []string{"protocol"})
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobgate_connections_rejected_total",
		Help: "Client connections refused at accept by a connection limit.",
	}, []string{"protocol", "reason"})
	cut := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobgate_connections_cut_total",
		Help: "Client connections closed by jobgate for idleness, a timeout or not reading its replies.",
	}, []string{"protocol", "reason"})
	reg.MustRegister(open, accepted, rejected, cut)
	for p := range numProtocols {
		ps := p.String()
		c := &ConnSeries{
			open:     open.WithLabelValues(ps),
			accepted: accepted.WithLabelValues(ps),
			rejected: make(map[string]prometheus.Counter),
			cut:      make(map[string]prometheus.Counter),
		}
		for _, r := range rejectReasons {
			c.rejected[r] = rejected.WithLabelValues(ps, r)
		}
		for _, r := range cutReasons {
			c.cut[r] = cut.WithLabelValues(ps, r)
		}
		out[p] = c
	}
	return out
}
