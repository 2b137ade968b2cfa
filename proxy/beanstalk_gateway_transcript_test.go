package proxy_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/routing/upstream"
)

// bsGatewayStarts are the gateways every Beanstalk transcript also runs
// through: one in front of the local engine and one in front of a real
// beanstalkd. Both have a single routed backend, so ids pass unchanged
// and the transcripts' literal ids hold.
var bsGatewayStarts = []func(testing.TB, int) bsServer{bsStartGatewayLocal, bsStartGatewayReal}

// bsGatewaySkip lists the transcripts ("server: transcript") that cannot
// pass through a gateway, with the reason.
var bsGatewaySkip = map[string]string{}

// bsServeGateway serves a Beanstalk server with gateway g on 127.0.0.1:0
// until the test ends.
func bsServeGateway(t testing.TB, g *proxy.BeanstalkGateway, maxJobSize int) (string, *proxy.BeanstalkServer) {
	t.Helper()
	return bsServe(t, proxy.BeanstalkConfig{
		EngineConfig: engine.Config{MaxJobSize: maxJobSize},
		Gateway:      g,
	})
}

// bsStartGatewayLocal is a gateway whose every route is local, with an
// upstream declared (and never reached), so the gateway session serves.
func bsStartGatewayLocal(t testing.TB, maxJobSize int) bsServer {
	t.Helper()
	c := config.Default()
	b := config.DefaultBackend()
	b.Name, b.ID, b.Type, b.Address, b.HealthInterval = "unused", 1, config.TypeBeanstalk, "127.0.0.1:1", 0
	c.Backends = append(c.Backends, b)
	if maxJobSize != 0 {
		c.Beanstalk.MaxJobSize = config.Size(maxJobSize)
	}
	g, err := proxy.NewBeanstalkGatewayFromConfig(c, nil)
	if err != nil || g == nil {
		t.Fatalf("gateway: %v %v", g, err)
	}
	addr, srv := bsServeGateway(t, g, maxJobSize)
	return bsServer{name: "gateway-local", addr: addr,
		drain: func(*testing.T) { srv.Engine().SetDraining(true) }}
}

// bsStartGatewayReal is a gateway in front of one real beanstalkd, built
// by hand with the backend as id 0: the id map then passes ids through,
// which is what lets the transcripts' literal ids hold. (Every other
// routing path is the one a configured upstream takes.)
func bsStartGatewayReal(t testing.TB, maxJobSize int) bsServer {
	t.Helper()
	var flags []string
	if maxJobSize != 0 {
		flags = append(flags, "-z", strconv.Itoa(maxJobSize))
	}
	addr := testutil.StartBeanstalkd(t, flags...)
	g := bsSingleGateway(t, addr, 0)
	gwAddr, _ := bsServeGateway(t, g, maxJobSize)
	return bsServer{name: "gateway-beanstalkd", addr: gwAddr,
		drain: func(t *testing.T) { bsSignalReal(t, addr) }}
}

// bsSingleGateway routes every tube to the beanstalkd at addr, as backend id.
func bsSingleGateway(t testing.TB, addr string, id int) *proxy.BeanstalkGateway {
	t.Helper()
	ub, err := upstream.NewBeanstalk(upstream.BeanstalkConfig{Config: upstream.Config{Addr: addr, IOTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	b := &routing.Backend{ID: id, Name: "beanstalkd", Beanstalk: ub}
	p, err := routing.NewPool("all", routing.Single, b)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := routing.NewRules(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := routing.NewIDMap([]*routing.Backend{b})
	if err != nil {
		t.Fatal(err)
	}
	return &proxy.BeanstalkGateway{Rules: rules, IDs: ids}
}

// bsGatewayMaskKeys are, beyond bsMaskKeys, the stats a gateway changes by
// talking to its backend: it sends use, watch and ignore when a backend
// needs them and reserves in rounds of reserve-with-timeout. A job's own
// counters (reserves, releases, ...) are not masked: clients read them,
// Laravel for one counts a job's attempts by its reserves.
var bsGatewayMaskKeys = regexp.MustCompile(`(?m)^(cmd-[a-z-]+|current-producers|current-workers|current-waiting|current-using|current-watching): .*$`)

// TestBeanstalkGatewayDifferential sends the same random commands on three
// connections to a gateway in front of a beanstalkd and to a beanstalkd
// directly: every reply must be the same, but for the counters the
// gateway's own commands move.
func TestBeanstalkGatewayDifferential(t *testing.T) {
	t.Parallel()
	d := bsDiff{
		name:  "gateway",
		steps: 400,
		mask:  func(r string) string { return bsGatewayMaskKeys.ReplaceAllString(bsMask(r), "$1: *") },
		// A put whose body lacks its "\r\n": beanstalkd uses up a job id
		// on it, but the gateway answers EXPECTED_CRLF itself, and later
		// ids would differ.
		skip: func(cmd string) bool { return strings.HasSuffix(cmd, "abcde") },
	}
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			bsDiffRun(t, seed, bsStartGatewayReal(t, 1000), bsStartReal(t, 1000), d)
		})
	}
}
