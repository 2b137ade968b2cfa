package metrics

import "github.com/prometheus/client_golang/prometheus"

// Reasons a TLS handshake failed (jobgate_tls_handshake_failures_total):
// a small fixed set, so a scanner sending garbage cannot grow the label
// set. proxy maps each handshake error to one of them.
const (
	// TLSFailTimeout: the client did not finish within the handshake
	// timeout (silent clients, or too slow ones).
	TLSFailTimeout = "timeout"
	// TLSFailBadCertificate: the client's certificate was missing when
	// required, unknown to the client CA, expired or otherwise refused.
	TLSFailBadCertificate = "bad_certificate"
	// TLSFailProtocolVersion: no TLS version in common (a client below the
	// minimum) or not TLS at all (plaintext on a TLS port).
	TLSFailProtocolVersion = "protocol_version"
	// TLSFailOther: anything else (connection reset, no shared cipher...).
	TLSFailOther = "other"
)

var tlsFailReasons = []string{TLSFailTimeout, TLSFailBadCertificate, TLSFailProtocolVersion, TLSFailOther}

// newTLSFailures registers jobgate_tls_handshake_failures_total and fills
// each protocol's series with its counters.
func newTLSFailures(reg prometheus.Registerer, conns [numProtocols]*ConnSeries) {
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobgate_tls_handshake_failures_total",
		Help: "TLS handshakes on a client listener that failed, by reason (timeout, bad_certificate, protocol_version, other).",
	}, []string{"protocol", "reason"})
	reg.MustRegister(failed)
	for p := range numProtocols {
		c := conns[p]
		c.tlsFailed = make(map[string]prometheus.Counter, len(tlsFailReasons))
		for _, r := range tlsFailReasons {
			c.tlsFailed[r] = failed.WithLabelValues(p.String(), r)
		}
	}
}

// HandshakeFailed counts a failed TLS handshake; reason is one of the
// TLSFail* constants (anything else counts as TLSFailOther).
func (c *ConnSeries) HandshakeFailed(reason string) { pick(c.tlsFailed, reason).Inc() }
