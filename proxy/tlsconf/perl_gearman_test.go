package tlsconf

import (
	"context"
	"crypto/tls"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gmcodec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
)

// whoamiGearman serves a minimal Gearman job server on a TLS listener:
// every submitted job completes at once with the client's identity, the
// verified certificate's CN (or "-"), as its result.
func whoamiGearman(t *testing.T, conf *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
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
				r := gmcodec.NewReader(c, gmcodec.Limits{})
				w := gmcodec.NewWriter(c)
				for {
					f, err := r.ReadFrame()
					if err != nil {
						return
					}
					switch f.Packet.Type {
					case gmcodec.SubmitJob:
						w.WritePacket(gmcodec.Res, gmcodec.JobCreated, []byte("H:1"))
						w.WritePacket(gmcodec.Res, gmcodec.WorkComplete, []byte("H:1"), []byte(who))
					case gmcodec.EchoReq:
						w.WritePacket(gmcodec.Res, gmcodec.EchoRes, f.Packet.Data())
					}
					w.Flush()
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPerlGearmanTLS connects a real Gearman client library over TLS:
// Perl's Gearman::Client (Debian's libgearman-client-perl, through
// IO::Socket::SSL/OpenSSL), verifying the server against a private CA and
// presenting a client certificate. The identity the server extracts comes
// back as the job's result.
func TestPerlGearmanTLS(t *testing.T) {
	if out, err := exec.Command("perl", "-e", "use Gearman::Client; use IO::Socket::SSL; 1").CombinedOutput(); err != nil {
		t.Skipf("Perl Gearman with SSL not installed: %s", out)
	}
	dir := t.TempDir()
	serverCA, cert, key := fileSetup(t, dir)
	clientCA, otherCA := newCA(t, "client CA"), newCA(t, "other CA")
	cfg := baseTLS()
	cfg.Certificates = []config.CertKey{{CertFile: cert, KeyFile: key}}
	cfg.ClientAuth = config.ClientAuthRequest
	cfg.ClientCAFile = writeFile(t, filepath.Join(dir, "clients.pem"), clientCA.PEM)
	addr := whoamiGearman(t, newManager(t, cfg).ServerConfig())
	host, port, _ := net.SplitHostPort(addr)

	caFile := writeFile(t, filepath.Join(dir, "server-ca.PEM"), serverCA.PEM)
	wrongCA := writeFile(t, filepath.Join(dir, "wrong-ca.PEM"), otherCA.PEM)
	c, k := leaf(t, clientCA, "perl-client", true, nil)
	certFile, keyFile := writeFile(t, filepath.Join(dir, "c.pem"), c), writeFile(t, filepath.Join(dir, "c.key"), k)
	oc, ok := leaf(t, otherCA, "intruder", true, nil)
	otherCert, otherKey := writeFile(t, filepath.Join(dir, "o.pem"), oc), writeFile(t, filepath.Join(dir, "o.key"), ok)

	whoami := func(ca, cert, key string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		script := `
use Gearman::Client;
my %js = (host => $ARGV[0], port => $ARGV[1], use_ssl => 1, ca_file => $ARGV[2]);
$js{cert_file} = $ARGV[3] if $ARGV[3];
$js{key_file} = $ARGV[4] if $ARGV[4];
my $c = Gearman::Client->new(job_servers => [\%js]);
my $r = $c->do_task("whoami", "", {timeout => 5});
print ref $r ? "result: $$r\n" : "no result\n";
`
		out, _ := exec.CommandContext(ctx, "perl", "-e", script, host, port, ca, cert, key).CombinedOutput()
		return string(out)
	}
	for _, tc := range []struct {
		name, ca, cert, key, want string
	}{
		{"client certificate", caFile, certFile, keyFile, "result: perl-client\n"},
		{"no client certificate", caFile, "", "", "result: -\n"},
		// Refused handshakes: the client either gets no result or dies
		// reading (under TLS 1.3 the server rejects the client
		// certificate after the client thinks the handshake is done).
		{"client certificate from an unknown CA", caFile, otherCert, otherKey, ""},
		{"server not trusted", wrongCA, certFile, keyFile, ""},
	} {
		out := whoami(tc.ca, tc.cert, tc.key)
		if tc.want == "" && strings.Contains(out, "result:") || tc.want != "" && !strings.Contains(out, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, out, tc.want)
		}
		t.Logf("%s: %q", tc.name, out)
	}
}
