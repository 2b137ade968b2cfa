package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/jobgate/jobgate/metrics"
)

// TestHandshakeFailReason: the errors crypto/tls returns on the server
// side map to the few reasons of the failures metric, and anything else to
// "other", so the label set stays fixed.
func TestHandshakeFailReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, metrics.TLSFailTimeout},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, metrics.TLSFailBadCertificate},
		{errors.New("tls: client didn't provide a certificate"), metrics.TLSFailBadCertificate},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, metrics.TLSFailBadCertificate},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, metrics.TLSFailProtocolVersion},
		{errors.New("tls: client offered only unsupported versions: [302 301]"), metrics.TLSFailProtocolVersion},
		{io.EOF, metrics.TLSFailOther},
		{fmt.Errorf("wrapped: %w", errors.New("tls: no cipher suite supported by both client and server")), metrics.TLSFailOther},
	} {
		if got := handshakeFailReason(tc.err); got != tc.want {
			t.Errorf("handshakeFailReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
