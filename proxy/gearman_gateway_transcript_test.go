package proxy

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// gatewaySkipGearmand lists the transcripts that cannot pass through a
// gateway in front of gearmand, with the reason. Scripts marked "only:
// jobgate" are skipped too: they describe where jobgate's engine differs
// from gearmand.
var gatewaySkipGearmand = map[string]string{
	"CANT_DO and a worker leaving requeue the job":           "uses show jobs, an admin command the gateway answers from the local engine",
	"CAN_DO_TIMEOUT requeues a job its worker held too long": "uses show jobs, an admin command the gateway answers from the local engine",
	"maxqueue limits a function's queue":                     "maxqueue and create function are the local engine's",
	"status, prioritystatus and show jobs":                   "uses show jobs and show unique jobs, the local engine's",
	"cancel job":                                             "cancel job is the local engine's",
	"create and drop function":                               "create/drop function are the local engine's",
}

// gatewaySkipLocal lists the transcripts that cannot pass through a
// gateway in front of the local engine.
var gatewaySkipLocal = map[string]string{}

// TestGearmanGatewayTranscripts runs the Gearman transcripts through a
// gateway in front of a real gearmand (every function routed to it) and
// through a gateway in front of the local engine (an upstream is
// configured, so the gateway session is used, but every route is local).
func TestGearmanGatewayTranscripts(t *testing.T) {
	scripts := parseTranscripts(t)
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			t.Run("gateway-local", func(t *testing.T) {
				if why := gatewaySkipLocal[sc.name]; why != "" {
					t.Skip(why)
				}
				c := config.Default()
				b := config.DefaultBackend()
				b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "unused", 1, config.TypeGearman, "127.0.0.1:1", 0
				c.Backends = append(c.Backends, b)
				addr, _ := startGearmanGateway(t, c, gearman.Config{JobRetries: sc.retries, HandlePrefix: "H:jobgate"})
				runTranscript(t, sc, addr)
			})
			t.Run("gateway-gearmand", func(t *testing.T) {
				if sc.only != "" {
					t.Skip(sc.only)
				}
				if why := gatewaySkipGearmand[sc.name]; why != "" {
					t.Skip(why)
				}
				up := testutil.StartGearmand(t, sc.flags...)
				c, err := config.Upstreams([]string{up}, nil)
				if err != nil {
					t.Fatal(err)
				}
				addr, _ := startGearmanGateway(t, c, gearman.Config{JobRetries: sc.retries, HandlePrefix: "H:jobgate"})
				runTranscriptSynced(t, sc, addr, "@1:H:sync:0")
			})
		})
	}
}

// startGatewayOverGearmand serves a gateway that routes every function to
// n fresh gearmands (sharded by name when n > 1) and returns its address.
func startGatewayOverGearmand(t *testing.T, n int) string {
	t.Helper()
	var ups []string
	for range n {
		ups = append(ups, testutil.StartGearmand(t))
	}
	c, err := config.Upstreams(ups, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startGearmanGateway(t, c, gearman.Config{})
	return addr
}

// startGatewayMix serves a gateway whose default pool shards over the
// local engine and two fresh gearmands (adminGatewayConfig's "mix") and
// returns its address.
func startGatewayMix(t *testing.T) string {
	t.Helper()
	c := adminGatewayConfig(t, []string{testutil.StartGearmand(t), testutil.StartGearmand(t)})
	c.Routes.GearmanDefault = "mix"
	addr, _ := startGearmanGateway(t, c, gearman.Config{})
	return addr
}

// startGearmanGateway serves a gateway built from c on 127.0.0.1:0 until
// the test ends. Health checks are off, so that only the requests of the
// test reach the upstreams. mods adjust the server's configuration.
func startGearmanGateway(t testing.TB, c *config.Config, engine gearman.Config, mods ...func(*GearmanConfig)) (string, *GearmanServer) {
	t.Helper()
	for i := range c.Backends {
		c.Backends[i].HealthInterval = 0
	}
	g, err := NewGearmanGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.AdminTimeout = 3 * time.Second
	cfg := GearmanConfig{Engine: engine, Gateway: g}
	for _, m := range mods {
		m(&cfg)
	}
	srv, err := NewGearmanServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serveGearman(t, srv), srv
}
