//go:build linux

package upstream

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing"
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

// TestGearmanLoopMaxPendingLive: the bound on waiting output is read when
// it matters, not fixed at open: lowered afterwards (a reloaded write
// buffer limit), it applies to the open session.
func TestGearmanLoopMaxPendingLive(t *testing.T) {
	g := newGearman(t, stuckServer(t), 0)
	var limit atomic.Int64
	limit.Store(1 << 30)
	pk := newPackets()
	c, err := g.OpenLoop(context.Background(), routing.GearmanEvents{Packet: pk.packet, Closed: pk.lost},
		func() int { return int(limit.Load()) })
	if err != nil {
		t.Fatal(err)
	}
	serveLoop(t, c)
	chunk := []byte(strings.Repeat("d", 1<<20))
	work := &gearman.Packet{Magic: gearman.Req, Type: gearman.WorkData, Args: [][]byte{[]byte("H:x:1"), chunk}}
	for i := 0; i < 16; i++ { // more than the socket buffers take
		if err := c.Send(work); err != nil {
			t.Fatalf("send %d under a 1 GiB limit: %v", i, err)
		}
	}
	limit.Store(4 << 20)
	if err := c.Send(work); !routing.IsTransport(err) {
		t.Fatalf("send over the lowered limit: %v", err)
	}
}
