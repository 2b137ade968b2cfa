package proxy_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
)

// TestBeanstalkBeaneater drives jobgate, beanstalkd and the gateways in
// front of each (bsGatewayStarts) alike with the Ruby Beaneater client
// (Debian packages ruby and ruby-beaneater) through
// testdata/beanstalk_beaneater.rb.
func TestBeanstalkBeaneater(t *testing.T) {
	t.Parallel()
	ruby := testutil.RequireBinary(t, "ruby")
	testutil.RequireInstalled(t, "ruby-beaneater", exec.Command(ruby, "-e", "require 'beaneater'").Run())
	run := func(t *testing.T, srv bsServer, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, ruby, append([]string{"testdata/beanstalk_beaneater.rb", srv.addr}, args...)...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("beaneater against %s: %v\n%s", srv.name, err, out)
		}
	}
	for _, start := range append([]func(testing.TB, int) bsServer{bsStartJobgate, bsStartJobgateGoroutines, bsStartReal}, bsGatewayStarts...) {
		srv := start(t, 0)
		t.Run(srv.name, func(t *testing.T) { run(t, srv) })
	}
	srv := bsStartGatewaySharding(t, 0)
	t.Run(srv.name, func(t *testing.T) { run(t, srv, "sharded") })
}
