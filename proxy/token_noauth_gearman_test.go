package proxy

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
)

// TestGearmanGatewayTokensWithoutAuth: with no auth policy the token forms
// are still consumed: OPTION_REQ "auth=..." is accepted (not the
// upstream's UNKNOWN_OPTION), and a token client id never reaches the
// upstream's "workers".
func TestGearmanGatewayTokensWithoutAuth(t *testing.T) {
	up := testutil.StartGearmand(t)
	st := startGatewaySetup(t, []string{up}, config.Breaker{})
	fn := st.fnOwnedBy(t, "f", 1)
	const tok = "secret-token-0123456789"
	c := dialGW(t, st.addr)
	c.send(codec.OptionReq, "auth="+tok)
	if p := c.expect(codec.OptionRes); string(p.Args[0]) != "auth="+tok {
		t.Fatalf("OPTION_RES %q", p.Args[0])
	}
	c.send(codec.SetClientID, "jobgate-auth."+tok)
	c.send(codec.CanDo, fn) // opens the upstream session, replaying the client id
	c.send(codec.EchoReq, "sync")
	c.expect(codec.EchoRes)

	nc, err := net.Dial("tcp", up)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(nc)
	// Poll: the CAN_DO reaches gearmand on the gateway's own connection.
	for deadline := time.Now().Add(5 * time.Second); ; {
		nc.Write([]byte("workers\n"))
		var out strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == ".\n" {
				break
			}
			out.WriteString(line)
		}
		if strings.Contains(out.String(), tok) {
			t.Fatalf("the token reached the upstream:\n%s", out.String())
		}
		if strings.Contains(out.String(), fn) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never registered upstream:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
