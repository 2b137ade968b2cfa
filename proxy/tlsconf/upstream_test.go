package tlsconf

import (
	"bufio"
	"crypto/tls"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	gmcodec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
)

// TestClientConfigGearmandSSL dials a real gearmand --ssl with ClientConfig,
// as an upstream backend would, and round-trips an ECHO over TLS. Debian's
// gearmand accepts --ssl (and links libssl) but still speaks plaintext on
// the port, closing on the ClientHello as a bad packet; the test detects
// that by a plaintext ECHO on the same port and skips, saying so.
// TestClientConfig covers the same config against a Go TLS server.
func TestClientConfigGearmandSSL(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "upstream CA")
	c, k := leaf(t, ca, "gearmand", false, []string{"gearmand.internal"}, net.IPv4(127, 0, 0, 1))
	caFile := writeFile(t, filepath.Join(dir, "ca.PEM"), ca.PEM)
	certFile, keyFile := writeFile(t, filepath.Join(dir, "cert.pem"), c), writeFile(t, filepath.Join(dir, "key.pem"), k)
	// gearmand presents ssl-certificate and loads ssl-ca-file; jobgate's
	// client certificate comes from the same CA.
	cc, ck := leaf(t, ca, "jobgate", true, nil)
	clientCert, clientKey := writeFile(t, filepath.Join(dir, "client.pem"), cc), writeFile(t, filepath.Join(dir, "client.key"), ck)
	addr := testutil.StartGearmand(t, "--ssl", "--ssl-ca-file="+caFile, "--ssl-certificate="+certFile, "--ssl-key="+keyFile)

	echo := func(ct config.ClientTLS) error {
		t.Helper()
		conf, err := ClientConfig(ct, addr)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		w := gmcodec.NewWriter(conn)
		w.WritePacket(gmcodec.Req, gmcodec.EchoReq, []byte("over tls"))
		if err := w.Flush(); err != nil {
			return err
		}
		f, err := gmcodec.NewReader(conn, gmcodec.Limits{}).ReadFrame()
		if err != nil {
			return err
		}
		if f.Packet.Type != gmcodec.EchoRes || string(f.Packet.Data()) != "over tls" {
			t.Fatalf("reply %v", f.String())
		}
		t.Logf("%s, %s", tls.VersionName(conn.ConnectionState().Version), tls.CipherSuiteName(conn.ConnectionState().CipherSuite))
		return nil
	}
	if err := echo(config.ClientTLS{Enabled: true, CAFile: caFile, CertFile: clientCert, KeyFile: clientKey}); err != nil {
		if plainEcho(addr) {
			t.Skipf("this gearmand ignores --ssl: TLS handshake %v, yet a plaintext ECHO on the same port works", err)
		}
		t.Fatalf("by IP with client certificate: %v", err)
	}
	if err := echo(config.ClientTLS{Enabled: true, CAFile: caFile, ServerName: "gearmand.internal"}); err != nil {
		t.Fatalf("by server name, no client certificate: %v", err)
	}
	if err := echo(config.ClientTLS{Enabled: true, CAFile: caFile, ServerName: "other.internal"}); err == nil {
		t.Fatal("wrong server name accepted")
	}
	if err := echo(config.ClientTLS{Enabled: true}); err == nil {
		t.Fatal("private CA accepted against the system roots")
	}
}

// plainEcho reports whether a plaintext ECHO round trip works at addr.
func plainEcho(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	w := gmcodec.NewWriter(conn)
	w.WritePacket(gmcodec.Req, gmcodec.EchoReq, []byte("plain"))
	if w.Flush() != nil {
		return false
	}
	f, err := gmcodec.NewReader(conn, gmcodec.Limits{}).ReadFrame()
	return err == nil && f.Packet.Type == gmcodec.EchoRes && string(f.Packet.Data()) == "plain"
}

// TestClientConfigOpenSSLServer dials a TLS server that is not Go's,
// openssl s_server requiring a client certificate from the CA, with
// ClientConfig: the server verifies jobgate's client certificate and
// jobgate verifies the server's, then a line round-trips (-rev reverses
// it).
func TestClientConfigOpenSSLServer(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "upstream CA")
	c, k := leaf(t, ca, "upstream", false, []string{"upstream.internal"}, net.IPv4(127, 0, 0, 1))
	caFile := writeFile(t, filepath.Join(dir, "ca.PEM"), ca.PEM)
	certFile, keyFile := writeFile(t, filepath.Join(dir, "cert.pem"), c), writeFile(t, filepath.Join(dir, "key.pem"), k)
	cc, ck := leaf(t, ca, "jobgate", true, nil)
	clientCert, clientKey := writeFile(t, filepath.Join(dir, "client.pem"), cc), writeFile(t, filepath.Join(dir, "client.key"), ck)
	addr := testutil.StartServer(t, "openssl", func(port int) []string {
		return []string{"s_server", "-quiet", "-rev", "-accept", "127.0.0.1:" + strconv.Itoa(port),
			"-cert", certFile, "-key", keyFile, "-CAfile", caFile, "-Verify", "1", "-verify_return_error"}
	})
	rev := func(ct config.ClientTLS) (string, error) {
		conf, err := ClientConfig(ct, addr)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte("jobgate\n")); err != nil {
			return "", err
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		return line, err
	}
	got, err := rev(config.ClientTLS{Enabled: true, CAFile: caFile, CertFile: clientCert, KeyFile: clientKey, ServerName: "upstream.internal"})
	if err != nil || got != "etagboj\n" {
		t.Fatalf("with client certificate: %q, %v", got, err)
	}
	if _, err := rev(config.ClientTLS{Enabled: true, CAFile: caFile}); err == nil {
		t.Error("no client certificate, yet the server answered")
	}
}
