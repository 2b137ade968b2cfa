package proxy_test

import (
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/internal/testutil/authtest"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/proxy/auth"
	"github.com/jobgate/jobgate/routing"
)

// bgwGateway builds a gateway whose default pool shards over n real
// beanstalkd (ids 1..n); ups maps each id to its address.
func bgwGateway(t testing.TB, n int, mods ...func(*config.Config)) (g *proxy.BeanstalkGateway, ups map[int]string) {
	t.Helper()
	return bgwShardGateway(t, n, false, mods...)
}

// bgwShardGateway is bgwGateway with the local engine in the pool first
// when local is set. mods adjust the configuration before it is validated.
func bgwShardGateway(t testing.TB, n int, local bool, mods ...func(*config.Config)) (g *proxy.BeanstalkGateway, ups map[int]string) {
	t.Helper()
	c := config.Default()
	ups = map[int]string{}
	var members []string
	if local {
		members = append(members, config.LocalName)
	}
	for i := 1; i <= n; i++ {
		addr := testutil.StartBeanstalkd(t)
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address, b.HealthInterval = fmt.Sprintf("bs-%d", i), i, config.TypeBeanstalk, addr, 0
		c.Backends = append(c.Backends, b)
		members = append(members, b.Name)
		ups[i] = addr
	}
	c.Pools = append(c.Pools, config.Pool{Name: "shard", Strategy: config.StrategyShard, Backends: members})
	c.Routes.BeanstalkDefault = "shard"
	for _, m := range mods {
		m(c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, ups
}

// bgwStartAuth serves a gateway over one beanstalkd with policy p.
func bgwStartAuth(t *testing.T, p *auth.Policy) (gw, up string, srv *proxy.BeanstalkServer, logs *testutil.Buffer) {
	t.Helper()
	g, ups := bgwGateway(t, 1)
	logs = &testutil.Buffer{}
	gw, srv = bsServe(t, proxy.BeanstalkConfig{Gateway: g, Auth: p, Log: slog.New(slog.NewTextHandler(logs, nil))})
	return gw, ups[1], srv, logs
}

// gid is the gateway's id of job k of the upstream with id 1.
func gid(k uint64) string { return strconv.FormatUint(1<<routing.UpstreamIDBits|k, 10) }

// TestBeanstalkGatewayAuthCIDR is TestBeanstalkAuthCIDR through a gateway
// in front of a real beanstalkd: the same denials, each NOT_FOUND and
// logged, nothing reaching the upstream, the connection usable after.
func TestBeanstalkGatewayAuthCIDR(t *testing.T) {
	addr, up, _, logs := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	c, _ := bsAuthCIDRScenario(t, addr, func(k int) string { return gid(uint64(k)) })
	// Nothing half-done, seen on the upstream itself.
	u := bsDial(t, up)
	defer u.nc.Close()
	bsRoundTrip(t, u,
		"stats-tube default\r\n", "OK {n}\r\n---\nname: default\n{...}total-jobs: 0\n{...}",
		"list-tubes\r\n", "OK {n}\r\n---\n- default\n- jobs\n- pub.x\n\r\n",
		"stats-job 1\r\n", "OK {n}\r\n---\nid: 1\ntube: jobs\nstate: ready\n{...}",
		// The soft-denied watch never reached the upstream.
		"stats-tube jobs\r\n", "OK {n}\r\n---\nname: jobs\n{...}current-watching: 0\n{...}",
	)
	c.expectQuiet(t, "after the last reply")
	if l := logs.String(); !strings.Contains(l, "auth: denied") || !strings.Contains(l, "identity.name=local identity.method=cidr") {
		t.Errorf("denials not logged with the identity:\n%s", l)
	}
}

// TestBeanstalkGatewayAuthToken: the token is consumed by the gateway
// (never sent upstream), identifies the worker, which then reserves and
// deletes; the third unknown token closes the connection.
func TestBeanstalkGatewayAuthToken(t *testing.T) {
	addr, up, _, logs := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	bsAuthTokenScenario(t, addr, func(k int) string { return gid(uint64(k)) })
	u := bsDial(t, up)
	defer u.nc.Close()
	bsRoundTrip(t, u, "list-tubes\r\n", "OK {n}\r\n---\n- default\n- jobs\n\r\n")

	bsCheckUnknownTokens(t, addr, logs)
}

// TestBeanstalkGatewayAuthReserveFilter: a worker that may consume "jobs"
// but also watches "default" is never given a job from "default" by the
// upstream, at once or while it waits.
func TestBeanstalkGatewayAuthReserveFilter(t *testing.T) {
	addr, up, _, _ := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	adm := bsAdmin(t, addr)
	bsRoundTrip(t, adm, "put 0 0 60 1\r\nd\r\n", "INSERTED "+gid(1)+"\r\n")

	w := bsDial(t, addr)
	defer w.nc.Close()
	bsRoundTrip(t, w,
		"use jobgate-auth."+authtest.TokWorker+"\r\n", "USING jobgate-auth."+authtest.TokWorker+"\r\n",
		"watch jobs\r\n", "WATCHING 2\r\n",
		"reserve-with-timeout 0\r\n", "TIMED_OUT\r\n",
	)
	w.send(t, "reserve\r\n")
	w.expectQuiet(t, "waiting reserve")
	bsRoundTrip(t, adm, "put 0 0 60 1\r\ne\r\n", "INSERTED "+gid(2)+"\r\n")
	w.expectQuiet(t, "waiting reserve after a put into default")
	bsRoundTrip(t, adm, "use jobs\r\n", "USING jobs\r\n", "put 0 0 60 1\r\nf\r\n", "INSERTED "+gid(3)+"\r\n")
	w.expect(t, "RESERVED "+gid(3)+" 1\r\nf\r\n", "waiting reserve after a put into jobs")
	u := bsDial(t, up)
	defer u.nc.Close()
	bsRoundTrip(t, u, "stats-tube default\r\n", "OK {n}\r\n---\nname: default\n{...}current-jobs-ready: 2\n{...}")
}

// TestBeanstalkGatewayAuthDeniedReserveWaits: a reserve with no
// consumable tube is held before its NOT_FOUND, after the replies before
// it.
func TestBeanstalkGatewayAuthDeniedReserveWaits(t *testing.T) {
	addr, _, _, _ := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	c := bsDial(t, addr)
	defer c.nc.Close()
	c.send(t, "list-tube-used\r\nreserve\r\n")
	c.expect(t, "USING default\r\n", "reply before the denied reserve")
	c.expectQuiet(t, "denied reserve")
	c.expect(t, "NOT_FOUND\r\n", "denied reserve")
	bsRoundTrip(t, c, "list-tube-used\r\n", "USING default\r\n")
}

// TestBeanstalkGatewayAuthOthersJobs: a worker may delete, peek and
// stats-job jobs of tubes it may consume that it did not reserve (the
// gateway learns their tube from the upstream), and not those of other
// tubes; its own reserved job needs no lookup.
func TestBeanstalkGatewayAuthOthersJobs(t *testing.T) {
	addr, _, _, _ := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	adm := bsAdmin(t, addr)
	bsRoundTrip(t, adm,
		"use jobs\r\n", "USING jobs\r\n",
		"put 0 0 60 1\r\na\r\n", "INSERTED "+gid(1)+"\r\n",
		"put 0 0 60 1\r\nb\r\n", "INSERTED "+gid(2)+"\r\n",
		"use payroll\r\n", "USING payroll\r\n",
		"put 0 0 60 1\r\nc\r\n", "INSERTED "+gid(3)+"\r\n",
	)
	w := bsDial(t, addr)
	defer w.nc.Close()
	bsRoundTrip(t, w,
		"use jobgate-auth."+authtest.TokWorker+"\r\n", "USING jobgate-auth."+authtest.TokWorker+"\r\n",
		"peek "+gid(2)+"\r\n", "FOUND "+gid(2)+" 1\r\nb\r\n",
		"delete "+gid(2)+"\r\n", "DELETED\r\n",
		"peek "+gid(3)+"\r\n", "NOT_FOUND\r\n",
		"stats-job "+gid(3)+"\r\n", "NOT_FOUND\r\n",
		"delete "+gid(3)+"\r\n", "NOT_FOUND\r\n",
		"kick-job "+gid(3)+"\r\n", "NOT_FOUND\r\n",
		"delete "+gid(99)+"\r\n", "NOT_FOUND\r\n",
	)
	bsRoundTrip(t, adm, "stats-job "+gid(3)+"\r\n", "OK {n}\r\n---\nid: "+gid(3)+"\ntube: payroll\nstate: ready\n{...}")
}

// TestBeanstalkGatewayAuthGoClient: go-beanstalk, unmodified, through the
// gateway: token, denials as ErrNotFound, the connection in step after.
func TestBeanstalkGatewayAuthGoClient(t *testing.T) {
	addr, _, _, _ := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	runGoClientAuth(t, addr)
}

// TestBeanstalkGatewayAuthBeaneater is TestBeanstalkAuthBeaneater through
// the gateway in front of a real beanstalkd.
func TestBeanstalkGatewayAuthBeaneater(t *testing.T) {
	ruby := testutil.RequireBinary(t, "ruby")
	if out, err := exec.Command(ruby, "-e", `require "beaneater"`).CombinedOutput(); err != nil {
		t.Skipf("ruby beaneater not installed: %s", out)
	}
	addr, _, _, _ := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	runBeaneaterAuth(t, ruby, addr)
}

// TestBeanstalkGatewayAuthSwap: a new policy applies to an open gateway
// connection from its next command, and turning auth off lets the
// soft-denied watch reach the upstream.
func TestBeanstalkGatewayAuthSwap(t *testing.T) {
	addr, _, srv, _ := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c,
		"use jobs\r\n", "USING jobs\r\n",
		"put 0 0 60 1\r\na\r\n", "INSERTED "+gid(1)+"\r\n",
		"watch jobs\r\n", "WATCHING 2\r\n",
		"stats\r\n", "NOT_FOUND\r\n",
	)
	cfg := authtest.Config()
	cfg.Rules[0] = config.Rule{Identity: "local", Admin: true}
	srv.SetAuthPolicy(authtest.Policy(t, cfg))
	bsRoundTrip(t, c, "put 0 0 60 1\r\nb\r\n", "NOT_FOUND\r\n", "stats\r\n", "OK {n}\r\n---\n{...}")

	srv.SetAuthPolicy(nil)
	bsRoundTrip(t, c,
		"put 0 0 60 1\r\nc\r\n", "INSERTED "+gid(2)+"\r\n",
		"reserve-with-timeout 0\r\n", "RESERVED "+gid(1)+" 1\r\na\r\n",
	)
}

// TestBeanstalkGatewayAuthLocal: through a gateway whose routes lead to
// the local engine, jobs of other tubes are looked up there and denied,
// and the soft-denied tube is never reserved from.
func TestBeanstalkGatewayAuthLocal(t *testing.T) {
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "unused", 1, config.TypeBeanstalk, "127.0.0.1:1", 0
	c.Backends = append(c.Backends, b)
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	must(t, err)
	addr, _ := bsServe(t, proxy.BeanstalkConfig{Gateway: g, Auth: authtest.Policy(t, authtest.Config())})
	adm := bsAdmin(t, addr)
	bsRoundTrip(t, adm,
		"put 0 0 60 1\r\nd\r\n", "INSERTED 1\r\n",
		"use payroll\r\n", "USING payroll\r\n",
		"put 0 0 60 1\r\np\r\n", "INSERTED 2\r\n",
		"use jobs\r\n", "USING jobs\r\n",
		"put 0 0 60 1\r\nj\r\n", "INSERTED 3\r\n",
	)
	w := bsDial(t, addr)
	defer w.nc.Close()
	bsRoundTrip(t, w,
		"use jobgate-auth."+authtest.TokWorker+"\r\n", "USING jobgate-auth."+authtest.TokWorker+"\r\n",
		"peek 2\r\n", "NOT_FOUND\r\n",
		"delete 1\r\n", "NOT_FOUND\r\n",
		"peek 3\r\n", "FOUND 3 1\r\nj\r\n",
		"watch jobs\r\n", "WATCHING 2\r\n",
		"reserve-with-timeout 0\r\n", "RESERVED 3 1\r\nj\r\n",
		"reserve-with-timeout 0\r\n", "TIMED_OUT\r\n",
		"delete 3\r\n", "DELETED\r\n",
	)
	bsRoundTrip(t, adm, "stats-job 1\r\n", "OK {n}\r\n---\nid: 1\ntube: default\nstate: ready\n{...}")
}
