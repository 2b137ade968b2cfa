// Package acmetest runs Pebble, Let's Encrypt's test ACME server, in the
// test process on loopback, with a DNS server of its own, so that ACME
// issuance is tested for real without the internet.
package acmetest

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// CA is a running Pebble.
type CA struct {
	// URL is the ACME directory URL (tls.acme.ca).
	URL string
	// RootPEM is the certificate the ACME server's HTTPS presents, for
	// tls.acme.ca_root_file.
	RootPEM []byte
	// Roots trusts the certificates the CA issues.
	Roots *x509.CertPool
}

// Start runs Pebble until the test ends. It validates challenges for name
// on 127.0.0.1 at httpPort (HTTP-01) and tlsPort (TLS-ALPN-01), ports its
// validator takes at construction, so the caller picks them first. logw
// gets Pebble's log (nil: discarded). It sets Pebble's test knobs (no
// random sleep before validating, no deliberately rejected nonces) with
// t.Setenv, so the test cannot be parallel.
func Start(t *testing.T, name string, httpPort, tlsPort int, logw io.Writer) *CA {
	t.Helper()
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	if logw == nil {
		logw = io.Discard
	}
	plog := log.New(logw, "pebble ", 0)
	store := db.NewMemoryStore()
	pca := ca.New(plog, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
	pva := va.New(plog, httpPort, tlsPort, false, LoopbackDNS(t, name), store)
	front := wfe.New(plog, store, pva, pca, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewUnstartedServer(front.Handler())
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(pca.GetRootCert(0).Cert)
	return &CA{
		URL:     srv.URL + wfe.DirectoryPath,
		RootPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		Roots:   roots,
	}
}

// LoopbackDNS answers A queries for name with 127.0.0.1 over TCP on
// loopback (Pebble's validator asks over TCP) until the test ends, and
// returns its address.
func LoopbackDNS(t testing.TB, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(q)
		for _, qq := range q.Question {
			if qq.Qtype == dns.TypeA && qq.Name == dns.Fqdn(name) {
				r.Answer = append(r.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A:   net.IPv4(127, 0, 0, 1),
				})
			}
		}
		w.WriteMsg(r)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}
