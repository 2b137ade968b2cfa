package proxy_test

import (
	"testing"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/proxy"
)

// bsServe serves a Beanstalk server built from cfg on loopback until the
// test ends.
func bsServe(t testing.TB, cfg proxy.BeanstalkConfig) (string, *proxy.BeanstalkServer) {
	t.Helper()
	addr, _, srv := bsServeStop(t, cfg)
	return addr, srv
}

// bsServeStop is bsServe with a stop that shuts the server down early,
// for tests that restart a server on the same journal.
func bsServeStop(t testing.TB, cfg proxy.BeanstalkConfig) (string, func(), *proxy.BeanstalkServer) {
	t.Helper()
	if bsGoroutines(t) {
		cfg.Goroutines = true
	}
	srv, err := proxy.NewBeanstalkServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := testutil.ServeOn(t, srv, testutil.Listen(t))
	return addr, stop, srv
}

// gmServeStop serves a Gearman server built from cfg on loopback until
// the test ends or stop.
func gmServeStop(t testing.TB, cfg proxy.GearmanConfig) (string, func(), *proxy.GearmanServer) {
	t.Helper()
	srv, err := proxy.NewGearmanServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := testutil.ServeOn(t, srv, testutil.Listen(t))
	return addr, stop, srv
}
