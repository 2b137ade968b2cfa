//go:build linux

package upstream

import (
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
)

// TestGearmanLoopPacketOverMaxPending: one request larger than the bound
// on waiting output is still sent (the bound is on what waits before it),
// and the session goes on: a big job is no reason to fail the others.
func TestGearmanLoopPacketOverMaxPending(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 5*time.Second)
	c, pk := openLoop(t, g, 1<<20)
	send(t, c, gearman.SubmitJobBg, "f", "", strings.Repeat("d", 2<<20))
	flush(t, c)
	pk.expect(t, gearman.JobCreated)
	send(t, c, gearman.EchoReq, "after")
	flush(t, c)
	if p := pk.expect(t, gearman.EchoRes); string(p.Data()) != "after" {
		t.Fatalf("echo: %v", &p)
	}
}
