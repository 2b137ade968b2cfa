package main

import (
	"strconv"
	"testing"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing"
)

// TestBinaryEnforcesAuthOnBeanstalkGateway runs the binary as a Beanstalk
// gateway (-beanstalk-upstream) with an auth section: the gateway path
// enforces the policy as the engine path does, and what it denies never
// reaches the beanstalkd behind it.
func TestBinaryEnforcesAuthOnBeanstalkGateway(t *testing.T) {
	up := testutil.StartBeanstalkd(t)
	const token = "gateway-test-token-0123456789"
	cfgFile := writeFile(t, "auth-gw.yaml", `
auth:
  enabled: true
  identities:
    - name: worker
      token: `+token+`
    - name: local
      cidrs: ["127.0.0.1/32"]
  rules:
    - identity: local
      produce: ["jobs"]
    - identity: worker
      consume: ["jobs"]
`)
	p := startJobgate(t, 1, "-config", cfgFile, "-gearman", "", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", "", "-beanstalk-upstream", up)

	id := strconv.FormatUint(513<<routing.UpstreamIDBits|1, 10) // the first -beanstalk-upstream is backend 513
	_, _, say := lineDial(t, p.addrs["beanstalk"])
	say("put 0 0 60 1\r\na\r\n", "NOT_FOUND\r\n")
	say("use jobs\r\n", "USING jobs\r\n")
	say("put 0 0 60 1\r\nb\r\n", "INSERTED "+id+"\r\n")
	say("stats\r\n", "NOT_FOUND\r\n")
	say("watch jobs\r\n", "WATCHING 2\r\n")
	say("reserve-with-timeout 0\r\n", "NOT_FOUND\r\n")
	say("delete "+id+"\r\n", "NOT_FOUND\r\n")
	say("use jobgate-auth."+token+"\r\n", "USING jobgate-auth."+token+"\r\n")
	say("reserve-with-timeout 0\r\n", "RESERVED "+id+" 1\r\nb\r\n")
	say("delete "+id+"\r\n", "DELETED\r\n")

	// The upstream saw one job, in "jobs", and no token tube.
	_, _, direct := lineDial(t, up)
	direct("list-tubes\r\n", "OK 21\r\n---\n- default\n- jobs\n\r\n")
	direct("peek-ready\r\n", "NOT_FOUND\r\n") // the denied put into "default"
}
