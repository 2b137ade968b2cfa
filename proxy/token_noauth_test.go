package proxy_test

import (
	"strings"
	"testing"

	"github.com/jobgate/jobgate/internal/testutil/authtest"
	"github.com/jobgate/jobgate/proxy"
)

// TestBeanstalkGatewayTokensWithoutAuth: with no auth policy the token
// forms are still consumed, never reaching the upstream: a token "use" is
// echoed with the used tube unchanged, a reserved tube is never watched.
func TestBeanstalkGatewayTokensWithoutAuth(t *testing.T) {
	addr, up, _, _ := bgwStartAuth(t, nil)
	c := bsDial(t, addr)
	defer c.nc.Close()
	tok := "jobgate-auth." + authtest.TokWorker
	bsRoundTrip(t, c,
		"use "+tok+"\r\n", "USING "+tok+"\r\n",
		"list-tube-used\r\n", "USING default\r\n",
		"watch "+tok+"\r\n", "WATCHING 1\r\n",
		"stats-tube "+tok+"\r\n", "NOT_FOUND\r\n",
		"put 0 0 10 1\r\nx\r\n", "INSERTED {n}\r\n",
	)
	u := bsDial(t, up)
	defer u.nc.Close()
	bsRoundTrip(t, u, "list-tubes\r\n", "OK {n}\r\n---\n- default\n\r\n")
}

// TestBeanstalkAuthNeverLogsTokens: refusing a reserved tube name, which
// holds a token, logs it redacted.
func TestBeanstalkAuthNeverLogsTokens(t *testing.T) {
	addr, _, _, logs := bgwStartAuth(t, authtest.Policy(t, authtest.Config()))
	c := bsDial(t, addr)
	defer c.nc.Close()
	tok := "jobgate-auth." + authtest.TokAdmin
	bsRoundTrip(t, c,
		"watch "+tok+"\r\n", "WATCHING 1\r\n",
		"stats-tube "+tok+"\r\n", "NOT_FOUND\r\n",
	)
	c.expectQuiet(t, "after the last reply")
	l := logs.String()
	if !strings.Contains(l, "auth: denied") {
		t.Fatalf("the refusals were not logged:\n%s", l)
	}
	if strings.Contains(l, authtest.TokAdmin) {
		t.Errorf("a token was logged:\n%s", l)
	}
}

// TestBeanstalkTokensWithoutAuth is the same on the direct engine path:
// no tube named after a token is created.
func TestBeanstalkTokensWithoutAuth(t *testing.T) {
	addr, _ := bsServe(t, proxy.BeanstalkConfig{})
	c := bsDial(t, addr)
	defer c.nc.Close()
	tok := "jobgate-auth." + authtest.TokWorker
	bsRoundTrip(t, c,
		"use "+tok+"\r\n", "USING "+tok+"\r\n",
		"list-tube-used\r\n", "USING default\r\n",
		"watch "+tok+"\r\n", "WATCHING 1\r\n",
		"list-tubes\r\n", "OK {n}\r\n---\n- default\n\r\n",
	)
}
