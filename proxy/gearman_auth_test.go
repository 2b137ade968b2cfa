package proxy

import (
	"bufio"
	"crypto/tls"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/internal/testutil/authtest"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy/auth"
)

// gmAuthClient is a raw Gearman connection for the auth tests.
type gmAuthClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func gmAuthDial(t *testing.T, addr string, tc *tls.Config) *gmAuthClient {
	t.Helper()
	var nc net.Conn
	var err error
	if tc != nil {
		nc, err = tls.Dial("tcp", addr, tc)
	} else {
		nc, err = net.DialTimeout("tcp", addr, 5*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &gmAuthClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *gmAuthClient) send(ty codec.Type, args ...string) {
	c.t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	if _, err := c.nc.Write(codec.AppendPacket(nil, codec.Req, ty, bs...)); err != nil {
		c.t.Fatal(err)
	}
}

// expect reads one packet, which must be of type want with args (all of
// them, when given).
func (c *gmAuthClient) expect(want codec.Type, args ...string) []string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err := readPacket(c.br)
	if err != nil {
		c.t.Fatalf("want %v: %v", want, err)
	}
	var got []string
	for _, a := range p.Args {
		got = append(got, string(a))
	}
	if p.Type != want || (len(args) > 0 && !slices.Equal(got, args)) {
		c.t.Fatalf("got %s, want %v %q", describe(p), want, args)
	}
	return got
}

// admin sends an admin text line and returns the reply.
func (c *gmAuthClient) admin(line string) string {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := readText(c.br)
	if err != nil {
		c.t.Fatalf("%s: %v", line, err)
	}
	return got
}

// sync makes sure everything sent so far was handled, and that nothing
// was answered that should not have been.
func (c *gmAuthClient) sync() {
	c.t.Helper()
	c.send(codec.EchoReq, "sync")
	c.expect(codec.EchoRes, "sync")
}

// expectClosed checks that the server closed the connection.
func (c *gmAuthClient) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if p, err := readPacket(c.br); err == nil {
		c.t.Fatalf("got %s, want the connection closed", describe(p))
	}
}

// gmAuthScenario runs the auth checks every Gearman server mode must pass.
// upstream, when set, is the gearmand the gateway routes to: what was
// denied must not have reached it either.
func gmAuthScenario(t *testing.T, addr, upstream string) {
	adm := gmAuthDial(t, addr, nil)
	adm.send(codec.OptionReq, "auth="+authtest.TokAdmin)
	adm.expect(codec.OptionRes, "auth="+authtest.TokAdmin)

	// "local", by address: may submit to jobs, nothing else.
	c := gmAuthDial(t, addr, nil)
	c.send(codec.SubmitJob, "secret", "", "x")
	c.expect(codec.Error, string(auth.GearmanDeniedCode), auth.GearmanDeniedText)
	c.send(codec.SubmitReduceJob, "jobs", "", "secret", "", "x")
	c.expect(codec.Error, string(auth.GearmanDeniedCode), auth.GearmanDeniedText)
	c.send(codec.SubmitJobBg, "jobs", "", "payload")
	c.expect(codec.JobCreated)
	c.send(codec.CanDo, "jobs") // no reply: see proxy/auth
	c.sync()
	if got := c.admin("status"); got != auth.GearmanAdminDenied[:len(auth.GearmanAdminDenied)-2]+"\r\n" {
		t.Fatalf("status by local: %q", got)
	}
	c.send(codec.OptionReq, "auth=not-a-known-token-000")
	c.expect(codec.Error, string(auth.GearmanDeniedCode), auth.GearmanBadTokenText)
	c.send(codec.OptionReq, "exceptions")
	c.expect(codec.OptionRes, "exceptions")
	c.send(codec.SubmitJobBg, "pub.x", "", "p")
	c.expect(codec.JobCreated)

	// Nothing half-done: no "secret" function, no worker for "jobs".
	status := adm.admin("status")
	if !strings.Contains(status, "jobs\t1\t0\t0\n") || strings.Contains(status, "secret") {
		t.Fatalf("status after denials:\n%s", status)
	}
	if w := adm.admin("workers"); strings.Contains(w, " jobs") {
		t.Fatalf("a denied CAN_DO registered:\n%s", w)
	}
	if upstream != "" {
		up := adminQuery(t, upstream, "status")
		if !strings.Contains(up, "jobs\t1\t0\t0\n") || strings.Contains(up, "secret") {
			t.Fatalf("upstream status after denials:\n%s", up)
		}
		if w := adminQuery(t, upstream, "workers"); strings.Contains(w, " jobs") {
			t.Fatalf("a denied CAN_DO reached the upstream:\n%s", w)
		}
	}

	// "worker", by a token in SET_CLIENT_ID: consumed, not kept as the id.
	w := gmAuthDial(t, addr, nil)
	w.send(codec.SetClientID, auth.TokenPrefix+authtest.TokWorker)
	w.send(codec.CanDo, "jobs")
	w.send(codec.CanDo, "secret")
	w.sync()
	w.send(codec.GrabJob)
	job := w.expect(codec.JobAssign)
	if job[1] != "jobs" || job[2] != "payload" {
		t.Fatalf("assigned %q", job)
	}
	w.send(codec.WorkComplete, job[0], "done")
	w.send(codec.SubmitJob, "jobs", "", "x")
	w.expect(codec.Error, string(auth.GearmanDeniedCode), auth.GearmanDeniedText)
	workers := adm.admin("workers")
	if !strings.Contains(workers, " : jobs\n") || strings.Contains(workers, "secret") || strings.Contains(workers, "jobgate-auth") {
		t.Fatalf("workers:\n%s", workers)
	}
	if upstream != "" {
		if up := adminQuery(t, upstream, "workers"); strings.Contains(up, "jobgate-auth") || strings.Contains(up, "secret") {
			t.Fatalf("upstream workers:\n%s", up)
		}
	}

	// Unknown tokens: the third closes the connection.
	bad := gmAuthDial(t, addr, nil)
	bad.send(codec.OptionReq, "auth=not-a-known-token-001")
	bad.expect(codec.Error, string(auth.GearmanDeniedCode), auth.GearmanBadTokenText)
	bad.send(codec.SetClientID, auth.TokenPrefix+"short")
	bad.sync()
	bad.send(codec.OptionReq, "auth=not-a-known-token-002")
	bad.expectClosed()
}

// TestGearmanAuthLocal runs the scenario against the local engine, served
// by the event loop and by goroutines.
func TestGearmanAuthLocal(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		name := map[bool]string{false: "loop", true: "goroutines"}[goroutines]
		t.Run(name, func(t *testing.T) {
			addr := startJobgateGearmanServer(t, GearmanConfig{
				Engine: gearmanConfigForTest(), Goroutines: goroutines, Auth: authtest.Policy(t, authtest.Config()),
			})
			gmAuthScenario(t, addr, "")
		})
	}
}

// TestGearmanAuthGateway runs the scenario through the gateway, in front
// of a real gearmand and in front of the local engine.
func TestGearmanAuthGateway(t *testing.T) {
	withAuth := func(cfg *GearmanConfig) { cfg.Auth = authtest.Policy(t, authtest.Config()) }
	t.Run("gearmand", func(t *testing.T) {
		up := testutil.StartGearmand(t)
		c, err := config.Upstreams([]string{up}, nil)
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := startGearmanGateway(t, c, gearman.Config{HandlePrefix: "H:jobgate"}, withAuth)
		gmAuthScenario(t, addr, up)
	})
	t.Run("local", func(t *testing.T) {
		c := config.Default()
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address = "unused", 1, config.TypeGearman, "127.0.0.1:1"
		c.Backends = append(c.Backends, b)
		addr, _ := startGearmanGateway(t, c, gearman.Config{HandlePrefix: "H:jobgate"}, withAuth)
		gmAuthScenario(t, addr, "")
	})
}

// TestGearmanAuthCert: over crypto/tls, a verified client certificate
// (CN or DNS SAN) identifies a worker; without one the client is known by
// its address.
// The TLS connection is also tried behind a wrapper that only offers
// NetConn, as connlimit.Conn does.
func TestGearmanAuthCert(t *testing.T) {
	t.Run("tls.Conn", func(t *testing.T) { gmAuthCert(t, false) })
	t.Run("wrapped", func(t *testing.T) { gmAuthCert(t, true) })
}

// wrapListener hands out its connections wrapped in wrappedConn.
type wrapListener struct{ net.Listener }

func (l wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrappedConn{c}, nil
}

// wrappedConn hides the connection's own methods but NetConn.
type wrappedConn struct{ net.Conn }

func (c wrappedConn) NetConn() net.Conn { return c.Conn }

func gmAuthCert(t *testing.T, wrap bool) {
	ca := testutil.NewCA(t, "test CA")
	srv, err := NewGearmanServer(GearmanConfig{Engine: gearmanConfigForTest(), Auth: authtest.Policy(t, authtest.Config())})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = tls.NewListener(l, ca.MutualTLS(t))
	if wrap {
		l = wrapListener{l}
	}
	addr := serveGearmanOn(t, srv, l)

	prod := gmAuthDial(t, addr, ca.ClientTLS())
	for _, data := range []string{"a", "b"} {
		prod.send(codec.SubmitJobBg, "jobs", "", data)
		prod.expect(codec.JobCreated)
	}
	for _, cert := range []tls.Certificate{ca.Client(t, "worker.example"), ca.Client(t, "someone", "WORKER.example")} {
		w := gmAuthDial(t, addr, ca.ClientTLS(cert))
		w.send(codec.CanDo, "jobs")
		w.send(codec.GrabJob)
		job := w.expect(codec.JobAssign)
		w.send(codec.WorkComplete, job[0], "")
		w.send(codec.SubmitJob, "jobs", "", "x")
		w.expect(codec.Error, string(auth.GearmanDeniedCode), auth.GearmanDeniedText)
	}
	stranger := gmAuthDial(t, addr, ca.ClientTLS(ca.Client(t, "stranger.example")))
	stranger.send(codec.CanDo, "jobs")
	stranger.send(codec.GrabJob)
	stranger.expect(codec.NoJob) // its CAN_DO was dropped: nothing to grab
	stranger.send(codec.SubmitJobBg, "jobs", "", "c")
	stranger.expect(codec.JobCreated) // but it is "local" by address
}

// TestGearmanAuthSwap: SetAuthPolicy takes effect on a live connection at
// its next request; nil turns auth off.
func TestGearmanAuthSwap(t *testing.T) {
	srv, err := NewGearmanServer(GearmanConfig{Engine: gearmanConfigForTest(), Auth: authtest.Policy(t, authtest.Config())})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveGearman(t, srv)
	c := gmAuthDial(t, addr, nil)
	c.send(codec.SubmitJobBg, "jobs", "", "a")
	c.expect(codec.JobCreated)
	if got := c.admin("version"); !strings.HasPrefix(got, "ERR PERMISSION_DENIED") {
		t.Fatalf("version: %q", got)
	}
	w := gmAuthDial(t, addr, nil)
	w.send(codec.OptionReq, "auth="+authtest.TokWorker)
	w.expect(codec.OptionRes)

	cfg := authtest.Config()
	cfg.Rules[0] = config.Rule{Identity: "local", Admin: true}
	srv.SetAuthPolicy(authtest.Policy(t, cfg))
	// The worker's token identifies it under the new policy too.
	w.send(codec.CanDo, "jobs")
	w.send(codec.GrabJob)
	if job := w.expect(codec.JobAssign); job[2] != "a" {
		t.Fatalf("assigned %q", job)
	}
	c.send(codec.SubmitJobBg, "jobs", "", "b")
	c.expect(codec.Error, string(auth.GearmanDeniedCode), auth.GearmanDeniedText)
	if got := c.admin("version"); !strings.HasPrefix(got, "OK ") {
		t.Fatalf("version after the swap: %q", got)
	}
	srv.SetAuthPolicy(nil)
	c.send(codec.SubmitJobBg, "secret", "", "c")
	c.expect(codec.JobCreated)
	c.send(codec.CanDo, "secret")
	c.send(codec.GrabJob)
	if job := c.expect(codec.JobAssign); job[1] != "secret" {
		t.Fatalf("assigned %q", job)
	}
}

// serveGearmanOn is serveGearman on a given listener.
func serveGearmanOn(t testing.TB, srv *GearmanServer, l net.Listener) string {
	t.Helper()
	addr, _ := testutil.ServeOn(t, srv, l)
	return addr
}

// benchAuthConfig grants loopback everything: the benchmarks' auth runs
// measure the checks, not denials.
var benchAuthConfig = config.Auth{
	Enabled:    true,
	Identities: []config.Identity{{Name: "local", CIDRs: []string{"127.0.0.1/32"}}},
	Rules:      []config.Rule{{Identity: "local", Produce: []string{"*"}, Consume: []string{"*"}, Admin: true}},
}
