package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy/connlimit"
)

// limitWith makes l count its connections with g's limits before their
// handshake: capped is l's inner listener wrapped by g (connlimit, with no
// Reject message: a client about to start TLS could not read a plain-text
// reply, so it sees the connection closed at once). A connection is then
// admitted, or refused, before any TLS work, keeps its slot through the
// handshake and frees it when it closes, whether the handshake failed or
// the server is done with it. g also gives the handshake timeout and cap
// (reloadable with the other limits) and counts failures. Call it before
// the first Accept (the servers' Serve does); later it changes nothing.
func (l *TLSListener) limitWith(g *connGuard, capped net.Listener) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return
	}
	l.guard, l.src = g, capped
}

// handshakeTimeout is the bound of the next handshake: the server's
// limits if it set one, else the listener's option.
func (l *TLSListener) handshakeTimeout() time.Duration {
	if l.guard != nil {
		if d := l.guard.current().HandshakeTimeout; d > 0 {
			return d
		}
	}
	return l.opts.HandshakeTimeout
}

// maxHandshakes is the cap on handshakes in progress: the server's limits
// when it serves the listener, else the listener's option; 0: no cap.
func (l *TLSListener) maxHandshakes() int {
	if l.guard != nil {
		return l.guard.current().MaxHandshakes
	}
	return l.opts.MaxHandshakes
}

// refuseHandshake closes a connection accepted while MaxHandshakes
// handshakes were in progress, freeing its connection slot, and counts it.
func (l *TLSListener) refuseHandshake(nc net.Conn) {
	nc.Close()
	l.opts.Log.Debug("tls handshake refused: too many in progress", "remote", nc.RemoteAddr().String())
	if l.guard != nil && l.guard.series != nil {
		l.guard.series.Rejected(metrics.ReasonMaxHandshakes)
	}
}

// handshakeFailed reports a failed handshake to the hook and the metrics.
func (l *TLSListener) handshakeFailed(remote net.Addr, err error) {
	if l.opts.OnHandshakeError != nil {
		l.opts.OnHandshakeError(remote, err)
	}
	if l.guard != nil && l.guard.series != nil {
		l.guard.series.HandshakeFailed(handshakeFailReason(err))
	}
}

// handshakeFailReason maps a server handshake error to one of the few
// reasons of jobgate_tls_handshake_failures_total. crypto/tls has typed
// errors for some cases only; alerts and most refusals are plain errors,
// recognised by the words crypto/tls uses ("certificate", "version").
func handshakeFailReason(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return metrics.TLSFailTimeout
	}
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) {
		return metrics.TLSFailBadCertificate
	}
	var rh tls.RecordHeaderError // plaintext on a TLS port
	if errors.As(err, &rh) {
		return metrics.TLSFailProtocolVersion
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "certificate"):
		// "client didn't provide a certificate", the alerts "bad
		// certificate", "unknown certificate authority", "certificate
		// required".
		return metrics.TLSFailBadCertificate
	case strings.Contains(msg, "version"):
		// "client offered only unsupported versions", the alert
		// "protocol version not supported".
		return metrics.TLSFailProtocolVersion
	}
	return metrics.TLSFailOther
}

// capTLS wraps l's inner listener with g's connection limits and hands it
// to l (see limitWith).
func (g *connGuard) capTLS(l *TLSListener, o connlimit.Options) *TLSListener {
	o.Reject = nil
	l.limitWith(g, connlimit.NewListener(l.inner, o))
	return l
}
