package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/internal/testutil/acmetest"
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
	const name = "jobgate.test"
	// The CA validates on ports it must know before jobgate binds them.
	httpPort, tlsPort := testutil.FreePort(t), testutil.FreePort(t)
	acme := acmetest.Start(t, name, httpPort, tlsPort, nil)

	dir := t.TempDir()
	root := testutil.WriteFile(t, dir, "acme-root.pem", acme.RootPEM)
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
`, tlsPort, dir, name, acme.URL, root, httpPort)))
	if p.addrs["acme_challenge"] != fmt.Sprintf("127.0.0.1:%d", httpPort) {
		t.Fatalf("challenge listener on %q", p.addrs["acme_challenge"])
	}

	roots := acme.Roots
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
