package proxy_test

import (
	"strconv"
	"testing"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/routing"
)

// bgwReloadConfig routes tube "a" to the backend named target and every
// other tube to bs-1, over the beanstalkd at ups[1] and ups[2].
func bgwReloadConfig(t *testing.T, ups map[int]string, target string) *config.Config {
	t.Helper()
	c := config.Default()
	for i := 1; i <= 2; i++ {
		b := config.DefaultBackend()
		b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "bs-"+strconv.Itoa(i), i, config.TypeBeanstalk, ups[i], 0
		c.Backends = append(c.Backends, b)
	}
	c.Routes.Beanstalk = []config.Route{{Exact: "a", Backend: target}}
	c.Routes.BeanstalkDefault = "bs-1"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// idOn is the gateway id of job k on backend b.
func idOn(b int, k uint64) string { return strconv.FormatUint(uint64(b)<<routing.UpstreamIDBits|k, 10) }

// TestBeanstalkGatewayReload: a reload moves tube "a" from bs-1 to bs-2
// under an open connection: its next put lands on bs-2, while the job it
// reserved on bs-1 (kept: its configuration did not change) is still its
// own to delete. A configuration that does not build changes nothing.
func TestBeanstalkGatewayReload(t *testing.T) {
	ups := map[int]string{1: testutil.StartBeanstalkd(t), 2: testutil.StartBeanstalkd(t)}
	g, err := proxy.NewBeanstalkGatewayFromConfig(bgwReloadConfig(t, ups, "bs-1"), nil)
	must(t, err)
	addr, srv := bsServe(t, proxy.BeanstalkConfig{Gateway: g})

	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c,
		"use a\r\n", "USING a\r\n",
		"watch a\r\n", "WATCHING 2\r\n",
		"put 0 0 60 1\r\nx\r\n", "INSERTED "+idOn(1, 1)+"\r\n",
		"put 0 0 60 1\r\ny\r\n", "INSERTED "+idOn(1, 2)+"\r\n",
		"reserve-with-timeout 0\r\n", "RESERVED "+idOn(1, 1)+" 1\r\nx\r\n",
	)

	apply, err := srv.PrepareReload(bgwReloadConfig(t, ups, "bs-2"), nil)
	must(t, err)
	apply()
	bsRoundTrip(t, c,
		"put 0 0 60 1\r\nz\r\n", "INSERTED "+idOn(2, 1)+"\r\n",
		"delete "+idOn(1, 1)+"\r\n", "DELETED\r\n",
		// "a" now lives on bs-2 only: its consumers reserve there.
		"reserve-with-timeout 0\r\n", "RESERVED "+idOn(2, 1)+" 1\r\nz\r\n",
		"delete "+idOn(2, 1)+"\r\n", "DELETED\r\n",
		"stats-tube a\r\n", "OK {n}\r\n---\nname: a\n{...}total-jobs: 1\n{...}",
	)
	// A new connection sees the new routing too.
	n := bsDial(t, addr)
	defer n.nc.Close()
	bsRoundTrip(t, n, "use a\r\n", "USING a\r\n", "put 0 0 60 1\r\nw\r\n", "INSERTED "+idOn(2, 2)+"\r\n")
	// The job left on bs-1 is still there, on the upstream.
	u := bsDial(t, ups[1])
	defer u.nc.Close()
	bsRoundTrip(t, u, "stats-job 2\r\n", "OK {n}\r\n---\nid: 2\ntube: a\nstate: ready\n{...}")

	bad := bgwReloadConfig(t, ups, "bs-2")
	bad.Routes.Beanstalk[0].Backend = "nowhere"
	if _, err := srv.PrepareReload(bad, nil); err == nil {
		t.Fatal("a route to nowhere was accepted")
	}
	bsRoundTrip(t, c, "put 0 0 60 1\r\nv\r\n", "INSERTED "+idOn(2, 3)+"\r\n")
	if err := srv.RoutesReady(); err != nil {
		t.Errorf("RoutesReady: %v", err)
	}
}

// TestBeanstalkGatewayReloadToLocal: a reload that drops every upstream
// routes every tube to the local engine, with its ids unchanged.
func TestBeanstalkGatewayReloadToLocal(t *testing.T) {
	ups := map[int]string{1: testutil.StartBeanstalkd(t), 2: testutil.StartBeanstalkd(t)}
	g, err := proxy.NewBeanstalkGatewayFromConfig(bgwReloadConfig(t, ups, "bs-1"), nil)
	must(t, err)
	addr, srv := bsServe(t, proxy.BeanstalkConfig{Gateway: g})
	c := bsDial(t, addr)
	defer c.nc.Close()
	bsRoundTrip(t, c, "put 0 0 60 1\r\nx\r\n", "INSERTED "+idOn(1, 1)+"\r\n")
	apply, err := srv.PrepareReload(config.Default(), nil)
	must(t, err)
	apply()
	bsRoundTrip(t, c,
		"put 0 0 60 1\r\ny\r\n", "INSERTED 1\r\n",
		"reserve-with-timeout 0\r\n", "RESERVED 1 1\r\ny\r\n",
	)
	// Nothing more reached the upstream.
	u := bsDial(t, ups[1])
	defer u.nc.Close()
	bsRoundTrip(t, u, "stats\r\n", "OK {n}\r\n---\n{...}total-jobs: 1\n{...}")
}

// TestBeanstalkReloadAddsUpstreamRefused: a server started on the direct
// path refuses a reload that adds Beanstalk upstreams.
func TestBeanstalkReloadAddsUpstreamRefused(t *testing.T) {
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{})
	must(t, err)
	defer srv.Shutdown(t.Context())
	if _, err := srv.PrepareReload(bgwReloadConfig(t, map[int]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}, "bs-1"), nil); err == nil {
		t.Fatal("a direct server accepted upstreams")
	}
	apply, err := srv.PrepareReload(config.Default(), nil)
	must(t, err)
	apply()
}
