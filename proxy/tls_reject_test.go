package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/proxy"
)

// refusedAfterHandshake reports whether a connection the client believes
// open is refused at its first exchange: under TLS 1.3 the server checks
// the client certificate after the client has finished its handshake, so
// the refusal (an alert, then close) arrives on the first read.
func refusedAfterHandshake(t *testing.T, addr string, conf *tls.Config) error {
	t.Helper()
	c, err := dialTLS(t, addr, conf)
	if err != nil {
		return err
	}
	defer c.Close()
	return echo(c, "should not come back")
}

// TestTLSRejectsWrongCA: a client that trusts another CA refuses the
// server; a client certificate from another CA is refused by the server
// (client_auth require); the server goes on serving.
func TestTLSRejectsWrongCA(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{clientAuth: config.ClientAuthRequire})
	good := f.clientCA.IssueTLS(t, testutil.Leaf{CN: "good", Client: true})
	other := testutil.NewCA(t, "other CA")

	conf := f.clientConf(good)
	conf.RootCAs = other.Pool()
	_, err := dialTLS(t, f.gearmanTLS, conf)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("client trusting another CA: %v, want an unknown-authority error", err)
	}

	intruder := other.IssueTLS(t, testutil.Leaf{CN: "intruder", Client: true})
	if err := refusedAfterHandshake(t, f.gearmanTLS, f.clientConf(intruder)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("client certificate from another CA: %v, want a certificate alert", err)
	}
	f.mustEcho(t, good)
}

// TestTLSRejectsExpiredClientCertificate: a client certificate from the
// right CA but expired is refused.
func TestTLSRejectsExpiredClientCertificate(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{clientAuth: config.ClientAuthRequire})
	expired := f.clientCA.IssueTLS(t, testutil.Leaf{CN: "expired", Client: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	if err := refusedAfterHandshake(t, f.gearmanTLS, f.clientConf(expired)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired client certificate: %v, want an expired-certificate alert", err)
	}
	if err := refusedAfterHandshake(t, f.beanstalkTLS, f.clientConf(expired)); err == nil {
		t.Fatal("expired client certificate accepted by the Beanstalk listener")
	}
	f.mustEcho(t, f.clientCA.IssueTLS(t, testutil.Leaf{CN: "fresh", Client: true}))
}

// TestTLSRejectsMissingClientCertificate: with client_auth require, a
// client without a certificate is refused; with request it is served.
func TestTLSRejectsMissingClientCertificate(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{clientAuth: config.ClientAuthRequire})
	if err := refusedAfterHandshake(t, f.gearmanTLS, f.clientConf()); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("no client certificate: %v, want a certificate-required alert", err)
	}
	f.mustEcho(t, f.clientCA.IssueTLS(t, testutil.Leaf{CN: "with cert", Client: true}))

	req := startTLSFixture(t, tlsFixtureOptions{clientAuth: config.ClientAuthRequest})
	req.mustEcho(t)
}

// TestTLSRejectsOldVersions: a client offering only TLS 1.1 (or 1.0) is
// refused at the handshake.
func TestTLSRejectsOldVersions(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{})
	conf := f.clientConf()
	conf.MinVersion, conf.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	_, err := dialTLS(t, f.gearmanTLS, conf)
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1 client: %v, want a protocol-version alert", err)
	}
	f.mustEcho(t)
}

// TestTLSRejectsPlaintext: a plaintext Gearman request on the TLS port is
// answered by a close well before the handshake timeout, and the server
// serves others meanwhile.
func TestTLSRejectsPlaintext(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{listener: proxy.TLSListenerOptions{HandshakeTimeout: time.Hour}})
	nc, err := net.DialTimeout("tcp", f.gearmanTLS, tlsTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(tlsTimeout))
	if err := echo(nc, "plaintext"); err == nil || isTimeout(err) {
		t.Fatalf("plaintext ECHO on the TLS port: %v, want the connection closed", err)
	}
	f.mustEcho(t)
}

// TestTLSGearmanCLIWithS: the gearman CLI's -S cannot talk to a TLS
// listener here. Debian's libgearman 1.1 is built without SSL (it links no
// libssl; -S only sets a flag), so it sends plaintext, which the listener
// refuses; the CLI must fail promptly, not hang. TestTLSPerlGearman is the
// real-library TLS client and worker.
func TestTLSGearmanCLIWithS(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("gearman"); err != nil {
		t.Skip("gearman CLI not installed")
	}
	f := startTLSFixture(t, tlsFixtureOptions{listener: proxy.TLSListenerOptions{HandshakeTimeout: time.Hour}})
	host, port, _ := net.SplitHostPort(f.gearmanTLS)
	ctx, cancel := context.WithTimeout(context.Background(), tlsTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "gearman", "-S", "-h", host, "-p", port, "-f", "reverse", "-s").CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gearman -S hung on the TLS port: %s", out)
	}
	// The CLI exits 0 even when it lost the connection: judge by what it
	// says.
	if !strings.Contains(string(out), "lost connection") {
		t.Fatalf("gearman -S (exit %v) did not lose the connection on a TLS port, so this libgearman may speak TLS: extend the test: %s", err, out)
	}
	t.Logf("gearman -S: %v: %s", err, strings.TrimSpace(string(out)))
	f.mustEcho(t)
}

// TestTLSHandshakeTimeout: a client that connects and sends nothing is
// dropped after the handshake timeout; others are served meanwhile.
func TestTLSHandshakeTimeout(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{listener: proxy.TLSListenerOptions{HandshakeTimeout: 200 * time.Millisecond}})
	silent, err := net.DialTimeout("tcp", f.beanstalkTLS, tlsTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	f.mustEcho(t)
	silent.SetReadDeadline(time.Now().Add(tlsTimeout))
	n, err := silent.Read(make([]byte, 1))
	if n != 0 || isTimeout(err) || err == nil {
		t.Fatalf("silent client: read %d, %v; want the connection closed by the server", n, err)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("silent client: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
