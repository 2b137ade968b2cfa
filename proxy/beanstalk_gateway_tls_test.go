package proxy_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/proxy"
)

// startTLSBeanstalkUpstream serves a plain jobgate Beanstalk server (the
// direct path) behind a TLS listener that requires a client certificate
// from ca: Debian's beanstalkd has no TLS.
func startTLSBeanstalkUpstream(t *testing.T, ca *testutil.CA) string {
	t.Helper()
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tc := ca.MutualTLS(t)
	tc.ClientAuth = tls.RequireAndVerifyClientCert
	addr, _ := testutil.ServeOn(t, srv, tls.NewListener(testutil.Listen(t), tc))
	return addr
}

// bgwTLSGateway serves a gateway routing every tube to the one upstream
// at addr, dialled with tls.
func bgwTLSGateway(t *testing.T, addr string, ctls config.ClientTLS) string {
	t.Helper()
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "tls-up", 1, config.TypeBeanstalk, addr, 0
	b.Breaker.Failures = 0
	b.TLS = ctls
	c.Backends = append(c.Backends, b)
	c.Routes.BeanstalkDefault = "tls-up"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := bsServe(t, proxy.BeanstalkConfig{Gateway: g})
	return gw
}

// TestBeanstalkGatewayUpstreamTLS: backends[].tls makes the gateway dial
// its Beanstalk upstream over TLS, verifying the server against ca_file
// and presenting cert_file; go-beanstalk puts, reserves and deletes
// through it. Without TLS, or trusting another CA, or without the client
// certificate, the upstream cannot be reached: INTERNAL_ERROR, and the
// connection stays usable.
func TestBeanstalkGatewayUpstreamTLS(t *testing.T) {
	ca := testutil.NewCA(t, "upstream CA")
	up := startTLSBeanstalkUpstream(t, ca)
	dir := t.TempDir()
	caFile := testutil.WriteFile(t, dir, "ca.pem", ca.PEM)
	certPEM, keyPEM := ca.Issue(t, testutil.Leaf{CN: "gateway", Client: true})
	certFile := testutil.WriteFile(t, dir, "gw.pem", certPEM)
	keyFile := testutil.WriteFile(t, dir, "gw.key", keyPEM)

	gw := bgwTLSGateway(t, up, config.ClientTLS{Enabled: true, CAFile: caFile, CertFile: certFile, KeyFile: keyFile})
	c := bgwDial(t, gw)
	id, err := c.Put([]byte("over tls"), 1, 0, time.Minute)
	must(t, err)
	if b, _ := split(id); b != 1 {
		t.Fatalf("id %d names backend %d, want 1", id, b)
	}
	gotID, body, err := c.Reserve(5 * time.Second)
	if err != nil || gotID != id || string(body) != "over tls" {
		t.Fatalf("reserve: %d %q %v", gotID, body, err)
	}
	must(t, c.Delete(id))

	other := testutil.NewCA(t, "other CA")
	for name, ctls := range map[string]config.ClientTLS{
		"plain":    {},
		"wrong CA": {Enabled: true, CAFile: testutil.WriteFile(t, dir, "other.pem", other.PEM), CertFile: certFile, KeyFile: keyFile},
		"no cert":  {Enabled: true, CAFile: caFile},
	} {
		t.Run(name, func(t *testing.T) {
			bad := bsDial(t, bgwTLSGateway(t, up, ctls))
			defer bad.nc.Close()
			bsRoundTrip(t, bad,
				"put 0 0 60 1\r\nx\r\n", "INTERNAL_ERROR\r\n",
				"list-tube-used\r\n", "USING default\r\n",
			)
		})
	}
}
