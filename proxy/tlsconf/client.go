package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/jobgate/jobgate/config"
)

// ClientConfig builds the *tls.Config for dialling an upstream server at
// addr (host:port) over TLS, as gearmand --ssl expects: the server is
// verified against c.CAFile (or the system roots) for c.ServerName (or
// addr's host), and c.CertFile/c.KeyFile are presented as the client
// certificate when set. It returns nil, nil when c.Enabled is false.
//
// The files are read once, here; a rotated upstream client certificate
// takes effect when the config is rebuilt (at a restart or reload).
func ClientConfig(c config.ClientTLS, addr string) (*tls.Config, error) {
	if !c.Enabled {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		CipherSuites:       modernCipherSuites,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, // opt-in, tests only; config.Warnings reports it
	}
	if tc.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("tls: upstream address %q: %w", addr, err)
		}
		tc.ServerName = host
	}
	if c.CAFile != "" {
		pool, err := loadPool(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: ca_file: %w", err)
		}
		tc.RootCAs = pool
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case c.CertFile != "" || c.KeyFile != "":
		return nil, errors.New("tls: cert_file and key_file go together")
	}
	return tc, nil
}

// VerifiedLeaf returns the client's leaf certificate if the handshake
// verified it against the configured client CAs, or nil: the only
// certificate auth may derive an identity from. (PeerCertificates alone
// holds whatever the client sent, verified or not.)
func VerifiedLeaf(cs tls.ConnectionState) *x509.Certificate {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return cs.VerifiedChains[0][0]
}

// loadPool reads a PEM bundle of CA certificates.
func loadPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parsePool(path, b)
}

func parsePool(path string, pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate found", path)
	}
	return pool, nil
}

// modernCipherSuites are the TLS 1.2 suites offered: ECDHE key exchange and
// AEAD ciphers only (forward secrecy, no CBC). TLS 1.3 suites are not
// configurable in Go and are all modern.
var modernCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}
