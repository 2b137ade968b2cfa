package proxy_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
)

// TestBeanstalkPheanstalk drives a real beanstalkd, jobgate and the
// gateways in front of each (bsGatewayStarts) with PHP's Pheanstalk 4
// (Debian php-pda-pheanstalk) through testdata/beanstalk_pheanstalk.php.
// The script prints what the client saw, step by step; every server must
// print what the real beanstalkd printed. Through a gateway sharding over
// the local engine and two beanstalkd, ids encode the backend, so there
// only the ids may differ.
func TestBeanstalkPheanstalk(t *testing.T) {
	t.Parallel()
	php := testutil.RequireBinary(t, "php")
	_, err := os.Stat("/usr/share/php/Pheanstalk/autoload.php")
	testutil.RequireInstalled(t, "php-pda-pheanstalk", err)
	run := func(t *testing.T, srv bsServer) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, php, "testdata/beanstalk_pheanstalk.php", srv.addr).CombinedOutput()
		if err != nil || !strings.HasSuffix(string(out), "done\n") {
			t.Fatalf("pheanstalk against %s: %v\n%s", srv.name, err, out)
		}
		return string(out)
	}
	want := run(t, bsStartReal(t, 0))
	for _, start := range append([]func(testing.TB, int) bsServer{bsStartJobgate, bsStartJobgateGoroutines}, bsGatewayStarts...) {
		srv := start(t, 0)
		t.Run(srv.name, func(t *testing.T) {
			if got := run(t, srv); got != want {
				t.Errorf("pheanstalk against %s printed\n%s\nbeanstalkd printed\n%s", srv.name, got, want)
			}
		})
	}
	srv := bsStartGatewaySharding(t, 0)
	t.Run(srv.name, func(t *testing.T) {
		relID := regexp.MustCompile(`job\+\d+`)
		got := relID.ReplaceAllString(run(t, srv), "job")
		if want := relID.ReplaceAllString(want, "job"); got != want {
			t.Errorf("pheanstalk through a sharding gateway printed\n%s\nbeanstalkd printed\n%s", got, want)
		}
	})
}
