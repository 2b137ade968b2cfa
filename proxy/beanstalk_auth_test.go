package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/internal/testutil/authtest"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/proxy/auth"
)

// bsStartAuth serves a Beanstalk server with policy p on loopback, over
// TLS when tc is set, until the test ends.
func bsStartAuth(t testing.TB, p *auth.Policy, tc *tls.Config) (*proxy.BeanstalkServer, string, *testutil.Buffer) {
	t.Helper()
	logs := &testutil.Buffer{}
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{
		Auth:       p,
		Log:        slog.New(slog.NewTextHandler(logs, nil)),
		Goroutines: bsGoroutines(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	l := testutil.Listen(t)
	if tc != nil {
		l = tls.NewListener(l, tc)
	}
	addr, _ := testutil.ServeOn(t, srv, l)
	return srv, addr, logs
}

// bsRoundTrip sends each line and expects its reply, in order.
func bsRoundTrip(t *testing.T, c *bsConn, pairs ...string) {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		c.send(t, pairs[i])
		c.expect(t, pairs[i+1], strings.TrimSpace(pairs[i]))
	}
}

// bsAdmin is a connection identified as admin by its token.
func bsAdmin(t *testing.T, addr string) *bsConn {
	t.Helper()
	c := bsDial(t, addr)
	t.Cleanup(func() { c.nc.Close() })
	bsRoundTrip(t, c, "use jobgate-auth."+authtest.TokAdmin+"\r\n", "USING jobgate-auth."+authtest.TokAdmin+"\r\n")
	return c
}

// TestBeanstalkAuthCIDR: a plain client from 127.0.0.1 is "local" (by
// CIDR; the 10.0.0.0/8 identity does not match it), which may put into
// "jobs" and nothing else. Every denial answers NOT_FOUND, is logged with
// the identity, changes nothing, and leaves the connection usable.
func TestBeanstalkAuthCIDR(t *testing.T) { bsBothPaths(t, testBeanstalkAuthCIDR) }

func testBeanstalkAuthCIDR(t *testing.T) {
	_, addr, logs := bsStartAuth(t, authtest.Policy(t, authtest.Config()), nil)
	c, adm := bsAuthCIDRScenario(t, addr, strconv.Itoa)
	// Nothing half-done: the denied put made no job, the reserved tube
	// name made no tube, the denied delete and reserve left job 1 ready.
	bsRoundTrip(t, adm,
		"stats-tube default\r\n", "OK {n}\r\n---\nname: default\n{...}total-jobs: 0\n{...}",
		"list-tubes\r\n", "OK {n}\r\n---\n- default\n- jobs\n- pub.x\n\r\n",
		"stats-job 1\r\n", "OK {n}\r\n---\nid: 1\ntube: jobs\nstate: ready\n{...}",
	)
	c.expectQuiet(t, "after the last reply")
	if l := logs.String(); !strings.Contains(l, "auth: denied") || !strings.Contains(l, "identity.name=local identity.method=cidr") {
		t.Errorf("denials not logged with the identity:\n%s", l)
	}
}

// bsAuthCIDRScenario is what a plain loopback client ("local" by CIDR)
// may and may not do on addr, a server or gateway with authtest.Config:
// every denial answers NOT_FOUND and leaves the connection usable. id
// names the k-th job put, as the server numbers it. It returns the
// client's connection and the admin's that put job 1, for the caller's
// checks of what the denials left.
func bsAuthCIDRScenario(t *testing.T, addr string, id func(k int) string) (c, adm *bsConn) {
	t.Helper()
	adm = bsAdmin(t, addr)
	bsRoundTrip(t, adm, "use jobs\r\n", "USING jobs\r\n", "put 0 0 60 1\r\nx\r\n", "INSERTED "+id(1)+"\r\n")

	c = bsDial(t, addr)
	t.Cleanup(func() { c.nc.Close() })
	bsRoundTrip(t, c,
		"put 0 0 60 1\r\na\r\n", "NOT_FOUND\r\n", // into "default"
		"use jobs\r\n", "USING jobs\r\n",
		"put 0 0 60 1\r\nb\r\n", "INSERTED "+id(2)+"\r\n",
		"use pub.x\r\n", "USING pub.x\r\n",
		"put 0 0 60 1\r\nc\r\n", "INSERTED "+id(3)+"\r\n",
		"use jobs\r\n", "USING jobs\r\n",
		// Consuming and admin are not granted.
		// A soft denial: watched, but never reserved from.
		"watch jobs\r\n", "WATCHING 2\r\n",
		"list-tubes-watched\r\n", "OK 21\r\n---\n- default\n- jobs\n\r\n",
		"ignore default\r\n", "WATCHING 1\r\n",
		"watch jobgate-auth.x\r\n", "WATCHING 1\r\n",
		"reserve-with-timeout 0\r\n", "NOT_FOUND\r\n",
		"reserve-job "+id(1)+"\r\n", "NOT_FOUND\r\n",
		"peek "+id(1)+"\r\n", "NOT_FOUND\r\n",
		"peek-ready\r\n", "NOT_FOUND\r\n",
		"stats-job "+id(1)+"\r\n", "NOT_FOUND\r\n",
		"delete "+id(1)+"\r\n", "NOT_FOUND\r\n",
		"kick 10\r\n", "NOT_FOUND\r\n",
		"kick-job "+id(1)+"\r\n", "NOT_FOUND\r\n",
		"stats\r\n", "NOT_FOUND\r\n",
		"list-tubes\r\n", "NOT_FOUND\r\n",
		"pause-tube jobs 10\r\n", "NOT_FOUND\r\n",
		"stats-tube payroll\r\n", "NOT_FOUND\r\n",
		// Producers may read their tube's counters.
		"stats-tube jobs\r\n", "OK {n}\r\n---\nname: jobs\n{...}current-jobs-ready: 2\n{...}",
		"list-tube-used\r\n", "USING jobs\r\n",
		"put 0 0 60 1\r\nd\r\n", "INSERTED "+id(4)+"\r\n",
	)
	return c, adm
}

// TestBeanstalkAuthAnonymous: with no identity matching loopback, every
// request that needs a right is denied, and logged as anonymous.
func TestBeanstalkAuthAnonymous(t *testing.T) { bsBothPaths(t, testBeanstalkAuthAnonymous) }

func testBeanstalkAuthAnonymous(t *testing.T) {
	cfg := authtest.Config()
	cfg.Identities = cfg.Identities[:4] // drop "local"
	cfg.Rules = cfg.Rules[1:]
	_, addr, logs := bsStartAuth(t, authtest.Policy(t, cfg), nil)
	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c,
		"use jobs\r\n", "USING jobs\r\n",
		"put 0 0 60 1\r\na\r\n", "NOT_FOUND\r\n",
		"stats\r\n", "NOT_FOUND\r\n",
		"list-tube-used\r\n", "USING jobs\r\n",
	)
	if l := logs.String(); !strings.Contains(l, "decision=denied-anonymous") {
		t.Errorf("anonymous denial not logged:\n%s", l)
	}
}

// TestBeanstalkAuthToken: `use jobgate-auth.<token>` is consumed (the used
// tube does not change, no such tube is made) and identifies the client;
// it may then consume "jobs". Unknown tokens change nothing, and the
// third closes the connection.
func TestBeanstalkAuthToken(t *testing.T) { bsBothPaths(t, testBeanstalkAuthToken) }

func testBeanstalkAuthToken(t *testing.T) {
	_, addr, logs := bsStartAuth(t, authtest.Policy(t, authtest.Config()), nil)
	bsAuthTokenScenario(t, addr, strconv.Itoa)

	adm := bsAdmin(t, addr)
	bsRoundTrip(t, adm, "list-tubes\r\n", "OK {n}\r\n---\n- default\n- jobs\n\r\n")

	bsCheckUnknownTokens(t, addr, logs)
}

// bsAuthTokenScenario: on addr, a server or gateway with
// authtest.Config, a "local" client cannot reserve until it presents the
// worker token with use, which is consumed (the used tube stays default);
// then it reserves, inspects and deletes the job a producer put, and may
// not put. id names the k-th job put, as the server numbers it. Both
// connections stay open until the test ends, so their tubes stay too.
func bsAuthTokenScenario(t *testing.T, addr string, id func(k int) string) {
	t.Helper()
	p := bsDial(t, addr)
	t.Cleanup(func() { p.nc.Close() })
	bsRoundTrip(t, p, "use jobs\r\n", "USING jobs\r\n", "put 0 0 60 2\r\nj1\r\n", "INSERTED "+id(1)+"\r\n")

	w := bsDial(t, addr)
	t.Cleanup(func() { w.nc.Close() })
	bsRoundTrip(t, w,
		"watch jobs\r\n", "WATCHING 2\r\n",
		"ignore default\r\n", "WATCHING 1\r\n",
		"reserve-with-timeout 0\r\n", "NOT_FOUND\r\n", // still "local": no consume right
		"use jobgate-auth."+authtest.TokWorker+"\r\n", "USING jobgate-auth."+authtest.TokWorker+"\r\n",
		"list-tube-used\r\n", "USING default\r\n",
		"reserve-with-timeout 0\r\n", "RESERVED "+id(1)+" 2\r\nj1\r\n",
		"stats-job "+id(1)+"\r\n", "OK {n}\r\n---\nid: "+id(1)+"\ntube: jobs\nstate: reserved\n{...}",
		"delete "+id(1)+"\r\n", "DELETED\r\n",
		"use jobs\r\n", "USING jobs\r\n",
		"put 0 0 60 1\r\nx\r\n", "NOT_FOUND\r\n", // a worker, not a producer
	)
}

// bsCheckUnknownTokens: a client presenting unknown tokens is refused
// (NOT_FOUND) and cut off at the third, and the server logs the refusal
// without the token.
func bsCheckUnknownTokens(t *testing.T, addr string, logs *testutil.Buffer) {
	t.Helper()
	bad := bsDial(t, addr)
	defer bad.nc.Close()
	bsRoundTrip(t, bad,
		"use jobgate-auth.not-a-known-token-000\r\n", "USING jobgate-auth.not-a-known-token-000\r\n",
		"use jobgate-auth.short\r\n", "USING jobgate-auth.short\r\n",
		"stats\r\n", "NOT_FOUND\r\n",
	)
	bad.send(t, "use jobgate-auth.not-a-known-token-001\r\n")
	bad.expectEOF(t, "third unknown token")
	if l := logs.String(); !strings.Contains(l, "auth: unknown token") || strings.Contains(l, "not-a-known-token") {
		t.Errorf("unknown tokens not logged, or logged in clear:\n%s", l)
	}
}

// TestBeanstalkAuthReserveFilter: a worker that may consume "jobs" but
// still watches "default" is never given a job from "default", neither at
// once nor while it waits.
func TestBeanstalkAuthReserveFilter(t *testing.T) { bsBothPaths(t, testBeanstalkAuthReserveFilter) }

func testBeanstalkAuthReserveFilter(t *testing.T) {
	_, addr, _ := bsStartAuth(t, authtest.Policy(t, authtest.Config()), nil)
	adm := bsAdmin(t, addr)
	bsRoundTrip(t, adm, "put 0 0 60 1\r\nd\r\n", "INSERTED 1\r\n")

	w := bsDial(t, addr)
	defer w.nc.Close()
	bsRoundTrip(t, w,
		"use jobgate-auth."+authtest.TokWorker+"\r\n", "USING jobgate-auth."+authtest.TokWorker+"\r\n",
		"watch jobs\r\n", "WATCHING 2\r\n",
		"reserve-with-timeout 0\r\n", "TIMED_OUT\r\n",
	)
	w.send(t, "reserve\r\n")
	w.expectQuiet(t, "waiting reserve")
	bsRoundTrip(t, adm, "put 0 0 60 1\r\ne\r\n", "INSERTED 2\r\n") // into default again
	w.expectQuiet(t, "waiting reserve after a put into default")
	bsRoundTrip(t, adm, "use jobs\r\n", "USING jobs\r\n", "put 0 0 60 1\r\nf\r\n", "INSERTED 3\r\n")
	w.expect(t, "RESERVED 3 1\r\nf\r\n", "waiting reserve after a put into jobs")
	bsRoundTrip(t, adm, "stats-tube default\r\n", "OK {n}\r\n---\nname: default\n{...}current-jobs-ready: 2\n{...}")
}

// TestBeanstalkAuthDeniedReserveWaits: a reserve with no consumable tube
// is answered only after a pause, so worker loops do not spin.
func TestBeanstalkAuthDeniedReserveWaits(t *testing.T) {
	bsBothPaths(t, testBeanstalkAuthDeniedReserveWaits)
}

func testBeanstalkAuthDeniedReserveWaits(t *testing.T) {
	_, addr, _ := bsStartAuth(t, authtest.Policy(t, authtest.Config()), nil)
	c := bsDial(t, addr)
	defer c.nc.Close()
	c.send(t, "reserve\r\n")
	c.expectQuiet(t, "denied reserve")
	c.expect(t, "NOT_FOUND\r\n", "denied reserve")
	bsRoundTrip(t, c, "list-tube-used\r\n", "USING default\r\n")
}

// TestBeanstalkAuthCert: over crypto/tls, a verified client certificate
// whose CN or DNS SAN is a cert_name identifies the client; without a
// certificate the client falls back to its address.
func TestBeanstalkAuthCert(t *testing.T) {
	ca := testutil.NewCA(t, "test CA")
	_, addr, _ := bsStartAuth(t, authtest.Policy(t, authtest.Config()), ca.MutualTLS(t))
	dial := func(certs ...tls.Certificate) *bsConn {
		nc, err := tls.Dial("tcp", addr, ca.ClientTLS(certs...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return &bsConn{nc: nc, br: bufio.NewReader(nc)}
	}
	prod := dial()
	bsRoundTrip(t, prod, "use jobs\r\n", "USING jobs\r\n", "put 0 0 60 1\r\na\r\n", "INSERTED 1\r\n", "put 0 0 60 1\r\nb\r\n", "INSERTED 2\r\n")
	for _, cert := range []tls.Certificate{ca.Client(t, "worker.example"), ca.Client(t, "someone", "x.example", "WORKER.example")} {
		w := dial(cert)
		bsRoundTrip(t, w,
			"watch jobs\r\n", "WATCHING 2\r\n",
			"reserve-with-timeout 0\r\n", "RESERVED {n} 1\r\n{*}\r\n",
			"use jobs\r\n", "USING jobs\r\n",
			"put 0 0 60 1\r\nx\r\n", "NOT_FOUND\r\n",
		)
	}
	other := dial(ca.Client(t, "stranger.example"))
	bsRoundTrip(t, other, "watch jobs\r\n", "WATCHING 2\r\n", "reserve-with-timeout 0\r\n", "NOT_FOUND\r\n", "use jobs\r\n", "USING jobs\r\n", "put 0 0 60 1\r\nc\r\n", "INSERTED 3\r\n")

	// go-beanstalk over crypto/tls, as the certificate's worker.
	nc, err := tls.Dial("tcp", addr, ca.ClientTLS(ca.Client(t, "worker.example")))
	if err != nil {
		t.Fatal(err)
	}
	gc := gobeanstalk.NewConn(nc)
	defer gc.Close()
	id, body, err := gobeanstalk.NewTubeSet(gc, "jobs").Reserve(5 * time.Second)
	if err != nil || id != 3 || string(body) != "c" {
		t.Fatalf("go-beanstalk reserve over TLS: %d %q %v", id, body, err)
	}
	if err := gc.Delete(id); err != nil {
		t.Fatal(err)
	}
	if _, err := gobeanstalk.NewTube(gc, "jobs").Put([]byte("x"), 0, 0, time.Minute); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("go-beanstalk put over TLS as a worker: %v", err)
	}
}

// TestBeanstalkAuthSwap: SetAuthPolicy takes effect on a live connection
// at its next command, and nil turns auth off.
func TestBeanstalkAuthSwap(t *testing.T) { bsBothPaths(t, testBeanstalkAuthSwap) }

func testBeanstalkAuthSwap(t *testing.T) {
	srv, addr, _ := bsStartAuth(t, authtest.Policy(t, authtest.Config()), nil)
	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c, "use jobs\r\n", "USING jobs\r\n", "put 0 0 60 1\r\na\r\n", "INSERTED 1\r\n", "stats\r\n", "NOT_FOUND\r\n")

	cfg := authtest.Config()
	cfg.Rules[0] = config.Rule{Identity: "local", Admin: true}
	srv.SetAuthPolicy(authtest.Policy(t, cfg))
	bsRoundTrip(t, c, "put 0 0 60 1\r\nb\r\n", "NOT_FOUND\r\n", "stats\r\n", "OK {n}\r\n---\n{...}")

	srv.SetAuthPolicy(nil)
	bsRoundTrip(t, c,
		"put 0 0 60 1\r\nc\r\n", "INSERTED 2\r\n",
		"watch jobs\r\n", "WATCHING 2\r\n",
		"reserve-with-timeout 0\r\n", "RESERVED 1 1\r\na\r\n",
	)
}

// TestBeanstalkAuthGoClient: go-beanstalk, unmodified, sends the token by
// using the reserved tube (pipelined, its reply skipped), then works;
// denials surface as ErrNotFound and the connection stays in step.
func TestBeanstalkAuthGoClient(t *testing.T) { bsBothPaths(t, testBeanstalkAuthGoClient) }

func testBeanstalkAuthGoClient(t *testing.T) {
	_, addr, _ := bsStartAuth(t, authtest.Policy(t, authtest.Config()), nil)
	runGoClientAuth(t, addr)
}

// runGoClientAuth drives go-beanstalk against addr, a server or gateway
// with authtest.Config: the local producer's put, denied put, stats and
// reserve; the worker token sent by using the reserved tube; the worker's
// reserve, delete and denied put; and the connection still in step.
func runGoClientAuth(t *testing.T, addr string) {
	t.Helper()
	prod := bgwDial(t, addr)
	jobs := gobeanstalk.NewTube(prod, "jobs")
	id, err := jobs.Put([]byte("hello"), 1, 0, time.Minute)
	if err != nil {
		t.Fatalf("put by local: %v", err)
	}
	if _, err := gobeanstalk.NewTube(prod, "payroll").Put([]byte("x"), 1, 0, time.Minute); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("denied put: %v", err)
	}
	if _, err := prod.Stats(); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("denied stats: %v", err)
	}
	if _, _, err := gobeanstalk.NewTubeSet(prod, "jobs").Reserve(0); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("denied reserve: %v", err)
	}

	wc := bgwDial(t, addr)
	if _, _, err := gobeanstalk.NewTube(wc, auth.TokenPrefix+authtest.TokWorker).PeekReady(); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("token use + peek-ready on default: %v", err)
	}
	gotID, body, err := gobeanstalk.NewTubeSet(wc, "jobs").Reserve(5 * time.Second)
	if err != nil || gotID != id || string(body) != "hello" {
		t.Fatalf("worker reserve: %d %q %v", gotID, body, err)
	}
	if err := wc.Delete(gotID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := gobeanstalk.NewTube(wc, "jobs").Put([]byte("x"), 1, 0, time.Minute); !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("worker put: %v", err)
	}
	if _, err := jobs.Put([]byte("again"), 1, 0, time.Minute); err != nil {
		t.Fatalf("put after the denials (out of step?): %v", err)
	}
}

// TestBeanstalkAuthBeaneater: Ruby's beaneater, unmodified, against the
// real server: the token `use`, denials raised as NotFoundError, a
// soft-denied watch whose reserve is refused, and the connection in step
// after each.
func TestBeanstalkAuthBeaneater(t *testing.T) { bsBothPaths(t, testBeanstalkAuthBeaneater) }

func testBeanstalkAuthBeaneater(t *testing.T) {
	ruby := testutil.RequireBinary(t, "ruby")
	if out, err := exec.Command(ruby, "-e", `require "beaneater"`).CombinedOutput(); err != nil {
		t.Skipf("ruby beaneater not installed: %s", out)
	}
	_, addr, _ := bsStartAuth(t, authtest.Policy(t, authtest.Config()), nil)
	runBeaneaterAuth(t, ruby, addr)
}

// runBeaneaterAuth runs beaneater against addr, served with
// testAuthConfig, and checks what each step raised or returned.
func runBeaneaterAuth(t *testing.T, ruby, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ruby, "-e", `
require "beaneater"
def try(label)
  r = yield
  puts "#{label}: #{r}"
rescue => e
  puts "#{label}: #{e.class}"
end
p = Beaneater.new(ARGV[0])
try("put default") { p.tubes["default"].put("a")[:status] }
try("put jobs") { p.tubes["jobs"].put("hello")[:status] }
try("stats") { p.stats.current_jobs_ready }
try("put jobs again") { p.tubes["jobs"].put("again")[:status] }
w = Beaneater.new(ARGV[0])
try("watch as local") { w.tubes.watch!("jobs"); "ok" }
try("reserve as local") { w.tubes.reserve(0).body }
try("token") { w.tubes.use("jobgate-auth." + ARGV[1]); "ok" }
try("reserve as worker") { j = w.tubes.reserve(0); j.delete; j.body }
try("put as worker") { w.tubes["jobs"].put("x")[:status] }
try("reserve again") { j = w.tubes.reserve(0); j.delete; j.body }
try("reserve empty") { w.tubes.reserve(0) }
`, addr, authtest.TokWorker).CombinedOutput()
	t.Logf("beaneater:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	want := `put default: Beaneater::NotFoundError
put jobs: INSERTED
stats: Beaneater::NotFoundError
put jobs again: INSERTED
watch as local: ok
reserve as local: Beaneater::NotFoundError
token: ok
reserve as worker: hello
put as worker: Beaneater::NotFoundError
reserve again: again
reserve empty: Beaneater::TimedOutError
`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// BenchmarkBeanstalkServerCycleAuth is BenchmarkBeanstalkServerCycle with
// auth on, every command allowed: the cost of the checks.
func BenchmarkBeanstalkServerCycleAuth(b *testing.B) {
	_, addr, _ := bsStartAuth(b, authtest.Policy(b, config.Auth{
		Enabled:    true,
		Identities: []config.Identity{{Name: "local", CIDRs: []string{"127.0.0.1/32"}}},
		Rules:      []config.Rule{{Identity: "local", Produce: []string{"*"}, Consume: []string{"*"}, Admin: true}},
	}), nil)
	bsBenchCycle(b, addr)
}
