package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"

	"github.com/jobgate/jobgate/internal/testutil"
)

// TestBinaryACME runs the binary with tls.acme pointed at Pebble (Let's
// Encrypt's test CA, in the test process, on loopback): jobgate obtains a
// certificate for jobgate.test through its challenge listener or its TLS
// listener, and serves Gearman over TLS with it; a client trusting only
// Pebble's root connects by name.
func TestBinaryACME(t *testing.T) {
	if testing.Short() {
		t.Skip("ACME issuance in -short mode")
	}
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	const name = "jobgate.test"
	// The CA validates on ports it must know before jobgate binds them.
	httpPort, tlsPort := testutil.FreePort(t), testutil.FreePort(t)
	plog := log.New(io.Discard, "", 0)
	store := db.NewMemoryStore()
	pca := ca.New(plog, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
	pva := va.New(plog, httpPort, tlsPort, false, loopbackDNS(t, name), store)
	front := wfe.New(plog, store, pva, pca, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	acme := httptest.NewUnstartedServer(front.Handler())
	acme.StartTLS()
	defer acme.Close()

	dir := t.TempDir()
	root := testutil.WriteFile(t, dir, "acme-root.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: acme.Certificate().Raw}))
	p := startJobgate(t, 2, "-config", writeFile(t, "acme.yaml", fmt.Sprintf(`
gearman:
  listen: ""
  tls_listen: "127.0.0.1:%d"
beanstalk:
  listen: ""
admin:
  listen: ""
data:
  dir: %q
tls:
  acme:
    domains: [%s]
    email: ops@jobgate.test
    ca: %q
    ca_root_file: %q
    challenge_listen: "127.0.0.1:%d"
`, tlsPort, dir, name, acme.URL+wfe.DirectoryPath, root, httpPort)))
	if p.addrs["acme_challenge"] != fmt.Sprintf("127.0.0.1:%d", httpPort) {
		t.Fatalf("challenge listener on %q", p.addrs["acme_challenge"])
	}

	roots := x509.NewCertPool()
	roots.AddCert(pca.GetRootCert(0).Cert)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", p.addrs["gearman_tls"], &tls.Config{RootCAs: roots, ServerName: name})
		if err == nil {
			gearmanEcho(t, c, "acme")
			t.Logf("certificate for %v from %q", c.ConnectionState().PeerCertificates[0].DNSNames, c.ConnectionState().PeerCertificates[0].Issuer.CommonName)
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ACME certificate served within 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopJobgate(t, p)
}

// loopbackDNS answers A queries for name with 127.0.0.1, over TCP (as
// Pebble's VA asks), and returns its address.
func loopbackDNS(t *testing.T, name string) string {
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
