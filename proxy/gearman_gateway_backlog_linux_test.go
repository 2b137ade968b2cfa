//go:build linux

package proxy

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// TestGearmanGatewayLoopUpstreamBacklog: a client pipelining more to an
// upstream than the upstream reads, past the write buffer limit, is not
// read meanwhile (as a goroutine gateway blocks on its write) rather than
// have the upstream session failed; once the upstream reads again, every
// request is answered.
func TestGearmanGatewayLoopUpstreamBacklog(t *testing.T) {
	gate := make(chan struct{})
	slow := listenTest(t, func(nc net.Conn) {
		<-gate // reads nothing until then
		r := codec.NewReader(nc, codec.Limits{})
		for n := 1; ; n++ {
			f, err := r.ReadFrame()
			if err != nil {
				return
			}
			if f.Packet.Type == codec.SubmitJobBg {
				nc.Write(codec.AppendPacket(nil, codec.Res, codec.JobCreated, []byte("H:slow:"+strconv.Itoa(n))))
			}
		}
	})
	c := reloadConfig(t, []string{slow}, "g1")
	c.Backends[0].IOTimeout = time.Minute
	// A limit well above what one read of the client can add to the
	// backlog (a few of these frames): the pause, at half of it, comes
	// before the limit itself fails the session.
	addr, srv := startGearmanGateway(t, c, gearman.Config{}, func(g *GearmanConfig) { g.MaxOutput = 4 << 20 })
	cl := dialGW(t, addr)
	// Open the session first (CAN_DO needs no reply), so that the pause
	// below is not the one for dialling.
	cl.write(append(pkt(codec.CanDo, "moved.x"), pkt(codec.EchoReq, "opened")...))
	cl.expect(codec.EchoRes)
	loopServed(t, srv)
	var conn *gearmanConn
	srv.mu.Lock()
	for x := range srv.conns {
		conn = x
	}
	srv.mu.Unlock()

	const jobs = 128
	body := strings.Repeat("d", 256<<10) // 32 MiB in all: more than the socket buffers take
	var batch []byte
	for i := 0; i < jobs; i++ {
		batch = append(batch, pkt(codec.SubmitJobBg, "moved."+strconv.Itoa(i), "", body)...)
	}
	wrote := make(chan error, 1)
	go func() { _, err := cl.nc.Write(batch); wrote <- err }()
	for deadline := time.Now().Add(10 * time.Second); conn.watch.flags.Load()&watchPaused == 0 || offLoopRunning(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client was not paused while the upstream read nothing")
		}
	}
	close(gate)
	for i := 0; i < jobs; i++ {
		if p := cl.next(); p.Type != codec.JobCreated {
			t.Fatalf("submit %d: %v", i, p.String())
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// TestGearmanGatewayLoopJobOverWriteLimit: a job larger than the write
// buffer limit (but within the packet size limit) is submitted through
// the loop gateway as through a goroutine one, twice on one session.
func TestGearmanGatewayLoopJobOverWriteLimit(t *testing.T) {
	up := testutil.StartGearmand(t)
	addr, srv := startGearmanGateway(t, reloadConfig(t, []string{up}, "g1"), gearman.Config{},
		func(g *GearmanConfig) { g.MaxOutput = 1 << 20 })
	cl := dialGW(t, addr)
	body := strings.Repeat("d", 2<<20)
	for i := 0; i < 2; i++ {
		cl.send(codec.SubmitJobBg, "moved.big", "", body)
		if p := cl.next(); p.Type != codec.JobCreated {
			t.Fatalf("submit %d: %v", i, p.String())
		}
	}
	loopServed(t, srv)
}
