package tlsconf

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
)

func newManager(t *testing.T, cfg config.TLS) *Manager {
	t.Helper()
	m, err := New(cfg, Options{DataDir: t.TempDir(), Logger: testLogger(t), ReloadInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func baseTLS() config.TLS { return config.Default().TLS }

func TestServerEcho(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := fileSetup(t, dir)
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	m := newManager(t, cfg)
	addr := echoServer(t, m.ServerConfig())

	for _, tc := range []struct{ name, serverName string }{
		{"SNI", "jobgate.local"},
		{"no SNI, by IP", "127.0.0.1"}, // Go sends no SNI for an IP
	} {
		t.Run(tc.name, func(t *testing.T) {
			who, leaf, err := roundTrip(t, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: tc.serverName})
			if err != nil {
				t.Fatal(err)
			}
			if who != "-" || leaf.Subject.CommonName != "jobgate.local" {
				t.Errorf("who %q leaf %q", who, leaf.Subject.CommonName)
			}
		})
	}
}

func TestVersions(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := fileSetup(t, dir)
	for _, tc := range []struct {
		min     string
		client  uint16 // client's max version
		success bool
	}{
		{config.TLS12, tls.VersionTLS10, false},
		{config.TLS12, tls.VersionTLS11, false},
		{config.TLS12, tls.VersionTLS12, true},
		{config.TLS12, tls.VersionTLS13, true},
		{config.TLS13, tls.VersionTLS12, false},
		{config.TLS13, tls.VersionTLS13, true},
	} {
		cfg := baseTLS()
		cfg.MinVersion = tc.min
		cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
		m := newManager(t, cfg)
		addr := echoServer(t, m.ServerConfig())
		_, _, err := roundTrip(t, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "jobgate.local",
			MinVersion: tls.VersionTLS10, MaxVersion: tc.client})
		if (err == nil) != tc.success {
			t.Errorf("min %s, client max %x: err %v, want success %v", tc.min, tc.client, err, tc.success)
		}
	}
}

// TestTLS12Suites checks that TLS 1.2 negotiates only forward-secret AEAD
// suites: a client offering only a CBC suite is refused.
func TestTLS12Suites(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := fileSetup(t, dir)
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	addr := echoServer(t, newManager(t, cfg).ServerConfig())
	cbc := &tls.Config{RootCAs: ca.Pool(), ServerName: "jobgate.local", MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}
	if _, _, err := roundTrip(t, addr, cbc); err == nil {
		t.Error("CBC suite accepted")
	}
	gcm := &tls.Config{RootCAs: ca.Pool(), ServerName: "jobgate.local", MaxVersion: tls.VersionTLS12}
	if _, _, err := roundTrip(t, addr, gcm); err != nil {
		t.Error(err)
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, cert, key := fileSetup(t, dir)
	clientCA := newCA(t, "client CA")
	otherCA := newCA(t, "other CA")
	caFile := writeFile(t, filepath.Join(dir, "clients.pem"), clientCA.PEM)

	good := pair(t, clientCA, "worker-1")
	stranger := pair(t, otherCA, "worker-1")

	for _, policy := range []string{config.ClientAuthRequest, config.ClientAuthRequire} {
		t.Run(policy, func(t *testing.T) {
			cfg := baseTLS()
			cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
			cfg.ClientAuth = policy
			cfg.ClientCAFile = caFile
			addr := echoServer(t, newManager(t, cfg).ServerConfig())
			base := tls.Config{RootCAs: serverCA.Pool(), ServerName: "jobgate.local"}

			c := base.Clone()
			c.Certificates = []tls.Certificate{good}
			who, _, err := roundTrip(t, addr, c)
			if err != nil || who != "worker-1" {
				t.Errorf("known CA: who %q, err %v", who, err)
			}

			// GetClientCertificate sends the certificate even though it
			// does not chain to the CAs the server asks for (Go's client
			// would otherwise leave it out).
			c = base.Clone()
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger, nil }
			if who, _, err := roundTrip(t, addr, c); err == nil {
				t.Errorf("certificate from an unknown CA accepted, identity %q", who)
			}

			who, _, err = roundTrip(t, addr, base.Clone())
			if policy == config.ClientAuthRequire && err == nil {
				t.Error("no certificate accepted under require")
			}
			if policy == config.ClientAuthRequest && (err != nil || who != "-") {
				t.Errorf("no certificate under request: who %q, err %v", who, err)
			}
		})
	}
}

func pair(t *testing.T, ca *testCA, cn string) tls.Certificate {
	t.Helper()
	c, k := leaf(t, ca, cn, true, nil)
	tc, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// TestRotation replaces the PEM files and drives the watcher's Reload by
// hand: the next handshake presents the new certificate, and a half-done
// rotation (new certificate, old key) keeps the old one in service.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := fileSetup(t, dir)
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	m := newManager(t, cfg)
	addr := echoServer(t, m.ServerConfig())
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "jobgate.local"}

	_, first, err := roundTrip(t, addr, client)
	if err != nil {
		t.Fatal(err)
	}

	c2, k2 := leaf(t, ca, "jobgate.local", false, []string{"jobgate.local"}, net.IPv4(127, 0, 0, 1))
	writeFile(t, cert, c2) // certificate first: the key does not match yet
	if err := m.Reload(); err == nil {
		t.Error("Reload accepted a certificate with the old key")
	}
	if _, got, err := roundTrip(t, addr, client); err != nil || !got.Equal(first) {
		t.Fatalf("after a half rotation: %v, serial %v, want the old %v", err, got.SerialNumber, first.SerialNumber)
	}

	writeFile(t, key, k2)
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	_, second, err := roundTrip(t, addr, client)
	if err != nil {
		t.Fatal(err)
	}
	if second.Equal(first) {
		t.Fatal("still the old certificate after Reload")
	}
	// Without SNI as well: the fallback follows the rotation.
	if _, got, err := roundTrip(t, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}); err != nil || !got.Equal(second) {
		t.Fatalf("no SNI after rotation: %v, serial %v", err, got.SerialNumber)
	}
}

// TestWatcher checks the polling watcher itself picks up a change.
func TestWatcher(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := fileSetup(t, dir)
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	m, err := New(cfg, Options{DataDir: t.TempDir(), Logger: testLogger(t), ReloadInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	addr := echoServer(t, m.ServerConfig())
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "jobgate.local"}
	_, first, err := roundTrip(t, addr, client)
	if err != nil {
		t.Fatal(err)
	}
	c2, k2 := leaf(t, ca, "jobgate.local", false, []string{"jobgate.local"})
	writeFile(t, key, k2)
	writeFile(t, cert, c2)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, got, err := roundTrip(t, addr, client)
		if err == nil && !got.Equal(first) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher did not reload: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	_, cert, key := fileSetup(t, dir)
	for name, cfg := range map[string]config.TLS{
		"no certificate":  {MinVersion: config.TLS12},
		"missing file":    {MinVersion: config.TLS12, Certificates: []config.CertKey{{CertFile: cert + ".nope", KeyFile: key}}},
		"swapped":         {MinVersion: config.TLS12, Certificates: []config.CertKey{{CertFile: key, KeyFile: cert}}},
		"bad client CA":   {MinVersion: config.TLS12, Certificates: []config.CertKey{{CertFile: cert, KeyFile: key}}, ClientAuth: config.ClientAuthRequire, ClientCAFile: key},
		"bad ACME root":   {MinVersion: config.TLS12, ACME: config.ACME{Domains: []string{"a.test"}, CA: "https://ca.test/dir", CARootFile: key}},
		"bad acme listen": {MinVersion: config.TLS12, ACME: config.ACME{Domains: []string{"a.test"}, ChallengeListen: "nope"}},
	} {
		if m, err := New(cfg, Options{DataDir: t.TempDir(), Logger: testLogger(t)}); err == nil {
			m.Close()
			t.Errorf("%s: no error", name)
		}
	}
}

// TestClientConfig dials a server that requires client certificates with
// the upstream-side config.
func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	serverCA, cert, key := fileSetup(t, dir)
	clientCA := newCA(t, "client CA")
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	cfg.ClientAuth = config.ClientAuthRequire
	cfg.ClientCAFile = writeFile(t, filepath.Join(dir, "clients.pem"), clientCA.PEM)
	addr := echoServer(t, newManager(t, cfg).ServerConfig())
	_, port, _ := net.SplitHostPort(addr)

	cc, ck := leaf(t, clientCA, "jobgate-gateway", true, nil)
	ct := config.ClientTLS{
		Enabled:  true,
		CAFile:   writeFile(t, filepath.Join(dir, "server-ca.PEM"), serverCA.PEM),
		CertFile: writeFile(t, filepath.Join(dir, "client.pem"), cc),
		KeyFile:  writeFile(t, filepath.Join(dir, "client.key"), ck),
	}
	// ServerName from the address's host.
	conf, err := ClientConfig(ct, "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	if conf.ServerName != "127.0.0.1" || conf.MinVersion != tls.VersionTLS12 {
		t.Errorf("ServerName %q MinVersion %x", conf.ServerName, conf.MinVersion)
	}
	if who, _, err := roundTrip(t, addr, conf); err != nil || who != "jobgate-gateway" {
		t.Fatalf("who %q, err %v", who, err)
	}
	// An explicit server name is verified.
	ct.ServerName = "wrong.example"
	conf, _ = ClientConfig(ct, "127.0.0.1:"+port)
	if _, _, err := roundTrip(t, addr, conf); err == nil {
		t.Error("wrong server name accepted")
	}
	if conf, err := ClientConfig(config.ClientTLS{}, addr); conf != nil || err != nil {
		t.Errorf("disabled: %v, %v", conf, err)
	}
	if _, err := ClientConfig(config.ClientTLS{Enabled: true, CertFile: ct.CertFile}, addr); err == nil {
		t.Error("cert without key accepted")
	}
}

// TestOpenSSLClient uses a TLS client that is not Go's: openssl s_client,
// verifying against the test CA, with and without a client certificate,
// and forced to TLS 1.1.
func TestOpenSSLClient(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	serverCA, cert, key := fileSetup(t, dir)
	clientCA := newCA(t, "client CA")
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	cfg.ClientAuth = config.ClientAuthRequest
	cfg.ClientCAFile = writeFile(t, filepath.Join(dir, "clients.pem"), clientCA.PEM)
	addr := echoServer(t, newManager(t, cfg).ServerConfig())
	caFile := writeFile(t, filepath.Join(dir, "server-ca.PEM"), serverCA.PEM)
	cc, ck := leaf(t, clientCA, "php-worker", true, nil)
	certFile := writeFile(t, filepath.Join(dir, "c.pem"), cc)
	keyFile := writeFile(t, filepath.Join(dir, "c.key"), ck)

	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		args = append([]string{"s_client", "-connect", addr, "-CAfile", caFile, "-verify_return_error",
			"-verify_hostname", "jobgate.local", "-servername", "jobgate.local", "-quiet"}, args...)
		cmd := exec.CommandContext(ctx, openssl, args...)
		cmd.Stdin = strings.NewReader("hello\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("-cert", certFile, "-key", keyFile)
	if err != nil || !strings.Contains(out, "php-worker\nhello\n") {
		t.Errorf("with client cert: %v\n%s", err, out)
	}
	out, err = run()
	if err != nil || !strings.Contains(out, "-\nhello\n") {
		t.Errorf("without client cert: %v\n%s", err, out)
	}
	// SECLEVEL=0 lets OpenSSL 3 offer TLS 1.1 at all, so the refusal seen
	// is the server's protocol_version alert, not the client's own policy.
	out, err = run("-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
	if err == nil || !strings.Contains(out, "alert protocol version") {
		t.Errorf("TLS 1.1 not refused by the server: %v\n%s", err, out)
	}
	_ = os.Remove(certFile)
}

// TestClientCARotation replaces the client CA bundle: after Reload,
// clients of the new CA are accepted and those of the old one refused.
func TestClientCARotation(t *testing.T) {
	dir := t.TempDir()
	serverCA, cert, key := fileSetup(t, dir)
	oldCA, newCA2 := newCA(t, "old client CA"), newCA(t, "new client CA")
	caFile := writeFile(t, filepath.Join(dir, "clients.pem"), oldCA.PEM)
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	cfg.ClientAuth = config.ClientAuthRequire
	cfg.ClientCAFile = caFile
	m := newManager(t, cfg)
	addr := echoServer(t, m.ServerConfig())
	dial := func(ca *testCA) error {
		c := pair(t, ca, "w")
		_, _, err := roundTrip(t, addr, &tls.Config{RootCAs: serverCA.Pool(), ServerName: "jobgate.local",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }})
		return err
	}
	if dial(oldCA) != nil || dial(newCA2) == nil {
		t.Fatal("before rotation")
	}
	writeFile(t, caFile, []byte("not PEM"))
	if err := m.Reload(); err == nil {
		t.Error("Reload accepted a broken CA file")
	}
	if dial(oldCA) != nil {
		t.Fatal("broken CA file took the old CAs out of service")
	}
	writeFile(t, caFile, newCA2.PEM)
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if dial(oldCA) == nil || dial(newCA2) != nil {
		t.Fatal("after rotation")
	}
}

// TestALPNClient: a client offering an application protocol (as an HTTP
// client does) is served; the acme-tls/1 protocol is kept to the CA's
// validation handshakes.
func TestALPNClient(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := fileSetup(t, dir)
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	addr := echoServer(t, newManager(t, cfg).ServerConfig())
	if _, _, err := roundTrip(t, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "jobgate.local", NextProtos: []string{"h2"}}); err != nil {
		t.Fatal(err)
	}
}

// TestGearmanCLI points the real gearman CLI's -S (SSL) mode at a TLS
// listener built from ServerConfig. Debian's libgearman is built without
// SSL, so -S is accepted and ignored and the CLI speaks plaintext; the test
// then skips, saying so. Were it ever built with SSL, the handshake would
// be checked here (the CLI has no option for a CA file, so it could only
// verify against libgearman's compiled-in CA path).
func TestGearmanCLI(t *testing.T) {
	gearman, err := exec.LookPath("gearman")
	if err != nil {
		t.Skip("gearman CLI not installed")
	}
	dir := t.TempDir()
	_, cert, key := fileSetup(t, dir)
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	conf := newManager(t, cfg).ServerConfig()
	ln := listen(t)
	result := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			result <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, conf)
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		result <- tc.Handshake()
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, gearman, "-S", "-h", "127.0.0.1", "-p", port, "-t", "3000", "-f", "x", "-s").CombinedOutput()
	err = <-result
	var rhe tls.RecordHeaderError
	if errors.As(err, &rhe) {
		t.Skipf("this gearman CLI sends plaintext with -S (libgearman built without SSL): first bytes %q; TLS with real Gearman clients is left to the proxy wiring tests", rhe.RecordHeader[:])
	}
	if err != nil {
		t.Fatalf("handshake with gearman -S: %v\n%s", err, out)
	}
}
