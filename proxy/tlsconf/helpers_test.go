package tlsconf

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
)

// testCA is the throwaway certificate authority the other packages' TLS
// tests use too.
type testCA = testutil.CA

func newCA(t *testing.T, name string) *testCA { return testutil.NewCA(t, name) }

// leaf has ca issue a certificate for cn with the given DNS and IP SANs;
// client selects client-auth usage. It returns PEM certificate and key.
func leaf(t *testing.T, ca *testCA, cn string, client bool, dns []string, ips ...net.IP) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.Issue(t, testutil.Leaf{CN: cn, Client: client, DNS: dns, IPs: ips})
}

func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	// Write then rename, as deployment tools do, so a reader never sees
	// half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// testLogger logs to t until the test ends; background goroutines
// (certmagic's) may log after that, which t.Log would panic on.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func testWriter(t *testing.T) io.Writer {
	w := &tWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

type tWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(b), "\n"))
	}
	return len(b), nil
}

// echoServer serves a trivial protocol over TLS on 127.0.0.1:0 (see
// echoServerOn) and returns its address.
func echoServer(t *testing.T, conf *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return echoServerOn(t, ln)
}

// echoServerOn serves on a TLS listener: after the handshake it writes the
// verified client certificate's CN (or "-") and a newline, then echoes one
// line and closes.
func echoServerOn(t *testing.T, ln net.Listener) string {
	t.Helper()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err != nil {
					return
				}
				who := "-"
				if leaf := VerifiedLeaf(tc.ConnectionState()); leaf != nil {
					who = leaf.Subject.CommonName
				}
				io.WriteString(c, who+"\n")
				// Echo one line and close, so that clients reading to EOF
				// (openssl s_client) end.
				if line, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					io.WriteString(c, line)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip dials addr with conf, reads the greeting, echoes one line and
// returns the greeting and the server's leaf certificate.
func roundTrip(t *testing.T, addr string, conf *tls.Config) (string, *x509.Certificate, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, conf)
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	who, err := r.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return "", nil, err
	}
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
	return who[:len(who)-1], c.ConnectionState().PeerCertificates[0], nil
}

// fileSetup writes a server certificate for 127.0.0.1 and "jobgate.local"
// into dir and returns the CA and the CertKey.
func fileSetup(t *testing.T, dir string) (*testCA, string, string) {
	t.Helper()
	ca := newCA(t, "test server CA")
	c, k := leaf(t, ca, "jobgate.local", false, []string{"jobgate.local"}, net.IPv4(127, 0, 0, 1))
	return ca, writeFile(t, filepath.Join(dir, "cert.pem"), c), writeFile(t, filepath.Join(dir, "key.pem"), k)
}
