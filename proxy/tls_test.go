package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	gmcodec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/proxy/tlsconf"
)

// tlsTimeout bounds every network step of the TLS tests: a hang, not a
// timing assumption.
const tlsTimeout = 10 * time.Second

// tlsFixture is a Gearman and a Beanstalk server, each on a plain and a TLS
// listener, with the TLS state from PEM files in dir, as jobgate serves
// them.
type tlsFixture struct {
	dir      string
	serverCA *testutil.CA // signs the server certificate
	clientCA *testutil.CA // client certificates are checked against it
	certFile string
	keyFile  string
	mgr      *tlsconf.Manager

	gearmanTLS, gearmanPlain     string
	beanstalkTLS, beanstalkPlain string
}

// tlsFixtureOptions vary the fixture per test.
type tlsFixtureOptions struct {
	clientAuth string                   // tls.client_auth; "" is none
	listener   proxy.TLSListenerOptions // handshake timeout
	reload     time.Duration            // the Manager's ReloadInterval; 0 disables the watcher
}

func startTLSFixture(t testing.TB, o tlsFixtureOptions) *tlsFixture {
	t.Helper()
	f := &tlsFixture{dir: t.TempDir(), serverCA: testutil.NewCA(t, "server CA"), clientCA: testutil.NewCA(t, "client CA")}
	c, k := f.serverCA.Issue(t, testutil.Leaf{CN: "jobgate"})
	f.certFile = testutil.WriteFile(t, f.dir, "cert.pem", c)
	f.keyFile = testutil.WriteFile(t, f.dir, "key.pem", k)
	tc := config.Default().TLS
	tc.Certificates = []config.CertKey{{CertFile: f.certFile, KeyFile: f.keyFile}}
	if o.clientAuth != "" && o.clientAuth != config.ClientAuthNone {
		tc.ClientAuth = o.clientAuth
		tc.ClientCAFile = testutil.WriteFile(t, f.dir, "clients.pem", f.clientCA.PEM)
	}
	reload := o.reload
	if reload == 0 {
		reload = -1
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := tlsconf.New(tc, tlsconf.Options{ReloadInterval: reload, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	f.mgr = mgr

	gs, err := proxy.NewGearmanServer(proxy.GearmanConfig{Engine: gearman.Config{HandlePrefix: "H:tls"}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(srv interface{ Serve(net.Listener) error }, secure bool) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if secure {
			l = proxy.NewTLSListener(l, mgr.ServerConfig(), o.listener)
		}
		go srv.Serve(l)
		return l.Addr().String()
	}
	f.gearmanPlain, f.gearmanTLS = serve(gs, false), serve(gs, true)
	f.beanstalkPlain, f.beanstalkTLS = serve(bs, false), serve(bs, true)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), tlsTimeout)
		defer cancel()
		if err := gs.Shutdown(ctx); err != nil {
			t.Errorf("gearman shutdown: %v", err)
		}
		if err := bs.Shutdown(ctx); err != nil {
			t.Errorf("beanstalk shutdown: %v", err)
		}
	})
	return f
}

// clientConf trusts the server CA, presenting cert when given.
func (f *tlsFixture) clientConf(cert ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: f.serverCA.Pool(), ServerName: "127.0.0.1", Certificates: cert}
}

// dialTLS connects and completes the client side of the handshake.
func dialTLS(t testing.TB, addr string, conf *tls.Config) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: tlsTimeout}, "tcp", addr, conf)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(tlsTimeout))
	return c, nil
}

// gmConn is a Gearman connection for the tests.
type gmConn struct {
	nc net.Conn
	r  *gmcodec.Reader
	w  *gmcodec.Writer
}

func newGmConn(nc net.Conn) *gmConn {
	return &gmConn{nc: nc, r: gmcodec.NewReader(nc, gmcodec.Limits{}), w: gmcodec.NewWriter(nc)}
}

func (c *gmConn) send(t *testing.T, typ gmcodec.Type, args ...string) {
	t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	c.w.WritePacket(gmcodec.Req, typ, bs...)
	if err := c.w.Flush(); err != nil {
		t.Fatalf("send %v: %v", typ, err)
	}
}

// expect reads the next packet, which must be of type typ.
func (c *gmConn) expect(t *testing.T, typ gmcodec.Type) *gmcodec.Packet {
	t.Helper()
	f, err := c.r.ReadFrame()
	if err != nil {
		t.Fatalf("waiting for %v: %v", typ, err)
	}
	if f.Packet.Type != typ {
		t.Fatalf("got %s, want %v", f.String(), typ)
	}
	p := f.Packet
	return &p
}

// echo round-trips an ECHO, reporting the error instead of failing.
func echo(nc net.Conn, data string) error {
	c := newGmConn(nc)
	c.w.WritePacket(gmcodec.Req, gmcodec.EchoReq, []byte(data))
	if err := c.w.Flush(); err != nil {
		return err
	}
	f, err := c.r.ReadFrame()
	if err != nil {
		return err
	}
	if f.Packet.Type != gmcodec.EchoRes || string(f.Packet.Data()) != data {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// mustEcho checks the server still serves a good TLS client.
func (f *tlsFixture) mustEcho(t *testing.T, cert ...tls.Certificate) {
	t.Helper()
	c, err := dialTLS(t, f.gearmanTLS, f.clientConf(cert...))
	if err != nil {
		t.Fatalf("good client: %v", err)
	}
	if err := echo(c, "still serving"); err != nil {
		t.Fatalf("good client ECHO: %v", err)
	}
	c.Close()
}

// TestTLSGearmanRoundTrip: a client submits a job over TLS, a worker on
// the plain listener (the same server) runs it, and the result comes back
// over TLS; then the roles swap. The handshake negotiated TLS 1.3 with the
// server's certificate.
func TestTLSGearmanRoundTrip(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{})
	for _, tc := range []struct{ name, client, worker string }{
		{"client over TLS", f.gearmanTLS, f.gearmanPlain},
		{"worker over TLS", f.gearmanPlain, f.gearmanTLS},
		{"both over TLS", f.gearmanTLS, f.gearmanTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dial := func(addr string) *gmConn {
				if addr == f.gearmanPlain {
					nc, err := net.DialTimeout("tcp", addr, tlsTimeout)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { nc.Close() })
					nc.SetDeadline(time.Now().Add(tlsTimeout))
					return newGmConn(nc)
				}
				c, err := dialTLS(t, addr, f.clientConf())
				if err != nil {
					t.Fatal(err)
				}
				cs := c.ConnectionState()
				if cs.Version != tls.VersionTLS13 || cs.PeerCertificates[0].Subject.CommonName != "jobgate" {
					t.Fatalf("TLS %s, certificate %q", tls.VersionName(cs.Version), cs.PeerCertificates[0].Subject.CommonName)
				}
				return newGmConn(c)
			}
			client, worker := dial(tc.client), dial(tc.worker)
			client.send(t, gmcodec.SubmitJob, "reverse", "", "tls payload")
			handle := string(client.expect(t, gmcodec.JobCreated).Handle())
			worker.send(t, gmcodec.CanDo, "reverse")
			worker.send(t, gmcodec.GrabJob)
			job := worker.expect(t, gmcodec.JobAssign)
			if string(job.Handle()) != handle || string(job.Data()) != "tls payload" {
				t.Fatalf("assigned %q %q, want %q", job.Handle(), job.Data(), handle)
			}
			worker.send(t, gmcodec.WorkComplete, handle, "daolyap slt")
			done := client.expect(t, gmcodec.WorkComplete)
			if string(done.Data()) != "daolyap slt" {
				t.Fatalf("result %q", done.Data())
			}
		})
	}
}

// TestTLSCertificateRotation replaces the PEM files on disk: new
// connections get the new certificate without a restart, and a connection
// opened before keeps working.
func TestTLSCertificateRotation(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{reload: 20 * time.Millisecond})
	leaf := func() *x509.Certificate {
		t.Helper()
		c, err := dialTLS(t, f.beanstalkTLS, f.clientConf())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	old := leaf()
	before, err := dialTLS(t, f.gearmanTLS, f.clientConf())
	if err != nil {
		t.Fatal(err)
	}
	before.SetDeadline(time.Time{})

	c, k := f.serverCA.Issue(t, testutil.Leaf{CN: "jobgate rotated"})
	// The key first, then the certificate, as a careless deployment does:
	// in between the pair does not match and the old one stays in service.
	testutil.WriteFile(t, f.dir, "key.pem", k)
	testutil.WriteFile(t, f.dir, "cert.pem", c)
	deadline := time.Now().Add(tlsTimeout)
	for {
		got := leaf()
		if got.Subject.CommonName == "jobgate rotated" {
			break
		}
		if got.SerialNumber.Cmp(old.SerialNumber) != 0 {
			t.Fatalf("served %q, neither the old nor the new certificate", got.Subject.CommonName)
		}
		if time.Now().After(deadline) {
			t.Fatal("the new certificate is not served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before.SetDeadline(time.Now().Add(tlsTimeout))
	if err := echo(before, "opened before the rotation"); err != nil {
		t.Fatalf("connection from before the rotation: %v", err)
	}
}
