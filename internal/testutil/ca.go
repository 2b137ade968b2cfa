package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for TLS tests: it issues server
// and client certificates as PEM, the form jobgate's config reads.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// PEM is Cert in PEM, for a ca_file or client_ca_file.
	PEM []byte
	key *ecdsa.PrivateKey
}

// serials keeps certificates of one test binary distinct.
var serials atomic.Int64

// NewCA makes a CA named name, valid for a day either side of now.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serials.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-24 * time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool trusting only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// CN is the subject common name.
	CN string
	// Client makes a client-authentication certificate; otherwise it is a
	// server certificate.
	Client bool
	// DNS and IPs are the subject alternative names. A server certificate
	// with neither gets 127.0.0.1.
	DNS []string
	IPs []net.IP
	// NotBefore and NotAfter default to an hour before and after now; set
	// NotAfter in the past for an expired certificate.
	NotBefore, NotAfter time.Time
}

// Issue signs l and returns the certificate and its key in PEM.
func (ca *CA) Issue(t testing.TB, l Leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usage := x509.ExtKeyUsageServerAuth
	if l.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	if !l.Client && len(l.DNS) == 0 && len(l.IPs) == 0 {
		l.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if l.NotBefore.IsZero() {
		l.NotBefore = time.Now().Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = time.Now().Add(time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1)),
		Subject:      pkix.Name{CommonName: l.CN},
		DNSNames:     l.DNS,
		IPAddresses:  l.IPs,
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// IssueTLS is Issue as a tls.Certificate, for Go clients and servers.
func (ca *CA) IssueTLS(t testing.TB, l Leaf) tls.Certificate {
	t.Helper()
	c, k := ca.Issue(t, l)
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// WriteFile writes b to name in dir by write-then-rename, as deployment
// tools do, so a reader polling the file never sees half of it. It
// returns the path.
func WriteFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Server issues a server certificate for 127.0.0.1.
func (ca *CA) Server(t testing.TB, commonName string) tls.Certificate {
	t.Helper()
	return ca.IssueTLS(t, Leaf{CN: commonName})
}

// Client issues a client certificate with the given subject common name
// and DNS SANs.
func (ca *CA) Client(t testing.TB, commonName string, dnsNames ...string) tls.Certificate {
	t.Helper()
	return ca.IssueTLS(t, Leaf{CN: commonName, Client: true, DNS: dnsNames})
}

// MutualTLS returns a server config presenting a certificate from ca and
// verifying client certificates against it when the client sends one
// (tls.VerifyClientCertIfGiven, jobgate's client_auth "request").
func (ca *CA) MutualTLS(t testing.TB) *tls.Config {
	t.Helper()
	return &tls.Config{
		Certificates: []tls.Certificate{ca.Server(t, "jobgate-test")},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
	}
}

// ClientTLS returns a client config trusting ca, presenting certs.
func (ca *CA) ClientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool(), Certificates: certs, MinVersion: tls.VersionTLS12}
}
