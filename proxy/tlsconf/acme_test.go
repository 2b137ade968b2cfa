package tlsconf

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil/acmetest"
)

// TestACME obtains a real certificate from Pebble, Let's Encrypt's test
// ACME server, run in-process on loopback. Nothing is mocked: Pebble's VA
// resolves jobgate.test through a loopback DNS server and validates the
// challenge against the Manager's HTTP-01 challenge listener or, for
// TLS-ALPN-01, the TLS listener built from ServerConfig; then a client
// trusting only Pebble's root gets the certificate.
func TestACME(t *testing.T) {
	if testing.Short() {
		t.Skip("ACME issuance in -short mode")
	}
	// One run per challenge type, the other disabled, so both paths are
	// proven every time (certmagic would otherwise pick one at random).
	for _, chal := range []string{"http-01", "tls-alpn-01"} {
		t.Run(chal, func(t *testing.T) { testACME(t, chal) })
	}
}

func testACME(t *testing.T, chal string) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()

	const name = "jobgate.test"
	// The two ports the CA validates on, bound before Pebble is built
	// since its VA takes them at construction.
	challengeLn := listen(t)
	tlsLn := listen(t)
	httpPort := challengeLn.Addr().(*net.TCPAddr).Port
	tlsPort := tlsLn.Addr().(*net.TCPAddr).Port

	var plog io.Writer
	if testing.Verbose() {
		plog = testWriter(t)
	}
	acme := acmetest.Start(t, name, httpPort, tlsPort, plog)

	dir := t.TempDir()
	rootFile := writeFile(t, filepath.Join(dir, "acme-server-root.pem"), acme.RootPEM)

	cfg := baseTLS()
	cfg.ACME = config.ACME{
		Domains:         []string{name},
		Email:           "ops@jobgate.test",
		CA:              acme.URL,
		CARootFile:      rootFile,
		ChallengeListen: "127.0.0.1:0", // replaced by ChallengeListener
	}
	m, err := New(cfg, Options{
		DataDir:           filepath.Join(dir, "data"),
		Logger:            testLogger(t),
		ChallengeListener: challengeLn,
		TLSALPNPort:       tlsPort,
		ReloadInterval:    -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.issuer.DisableHTTPChallenge = chal != "http-01"
	m.issuer.DisableTLSALPNChallenge = chal != "tls-alpn-01"
	addr := echoServerOn(t, tls.NewListener(tlsLn, m.ServerConfig()))
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}

	roots := acme.Roots
	client := &tls.Config{RootCAs: roots, ServerName: name}
	for {
		_, leaf, err := roundTrip(t, addr, client)
		if err == nil {
			if leaf.DNSNames[0] != name || leaf.Issuer.CommonName == "" {
				t.Fatalf("leaf %v issued by %v", leaf.DNSNames, leaf.Issuer)
			}
			t.Logf("got %v from %q", leaf.DNSNames, leaf.Issuer.CommonName)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no certificate within the deadline; last handshake: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	// The challenge listener answers nothing but challenges.
	if chal == "http-01" {
		resp, err := http.Get("http://" + m.ChallengeAddr().String() + "/.well-known/acme-challenge/unknown")
		if err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("challenge listener, unknown token: %v %v", resp, err)
		}
		if err == nil {
			resp.Body.Close()
		}
	}
	// A client without SNI gets the ACME certificate too.
	if _, leaf, err := roundTrip(t, addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", InsecureSkipVerify: true}); err != nil || leaf.DNSNames[0] != name {
		t.Errorf("no SNI: %v", err)
	}
	// The account and certificate are in the data directory.
	if m2, err := New(cfg, Options{DataDir: filepath.Join(dir, "data"), Logger: testLogger(t), ReloadInterval: -1,
		ChallengeListener: listen(t)}); err == nil {
		if _, err := m2.magic.CacheManagedCertificate(ctx, name); err != nil {
			t.Errorf("certificate not in storage: %v", err)
		}
		m2.Close()
	} else {
		t.Error(err)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
