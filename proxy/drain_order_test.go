package proxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// TestGearmanDrainErrorKeepsOrder: while draining, a submission's
// QUEUE_ERROR waits behind the JOB_CREATED the journal still holds for an
// earlier one; otherwise the client pins the error on the job that was
// queued, and takes the refused one for queued.
func TestGearmanDrainErrorKeepsOrder(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("goroutines=%v", goroutines), func(t *testing.T) {
			g := &gatedJournal{
				FileJournal: openTestJournal(t, t.TempDir(), journal.Always),
				open:        make(chan struct{}),
				outs:        make(map[<-chan struct{}]*gatedTicket),
				appended:    make(chan struct{}, 4),
			}
			cfg := gearmanConfigForTest()
			cfg.Journal = g
			srv, err := NewGearmanServer(GearmanConfig{Engine: cfg, Goroutines: goroutines})
			if err != nil {
				t.Fatal(err)
			}
			nc, br := dialGearman(t, serveGearman(t, srv))
			// Registered last, so it runs first: a failing test must not
			// leave the server's shutdown waiting on the journal.
			openGate := sync.OnceFunc(func() { close(g.open) })
			t.Cleanup(openGate)
			nc.Write(codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte("f"), nil, []byte("one")))
			select {
			case <-g.appended: // "one" is queued, its JOB_CREATED held
			case <-time.After(5 * time.Second):
				t.Fatal("the first submission never reached the journal")
			}
			srv.Drain()
			nc.Write(codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte("f"), nil, []byte("two")))
			// Nothing may arrive while the journal holds the first reply. (A
			// slow server can let a wrong order pass this read, never fail a
			// right one.)
			nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := br.Peek(1); !isTimeoutErr(err) {
				t.Fatalf("a reply overtook the held JOB_CREATED (err %v)", err)
			}
			openGate()
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			first, err := readPacket(br)
			if err != nil {
				t.Fatal(err)
			}
			second, err := readPacket(br)
			if err != nil {
				t.Fatal(err)
			}
			if first.Type != codec.JobCreated || second.Type != codec.Error || string(second.Args[0]) != "QUEUE_ERROR" {
				t.Errorf("replies %s then %s, want JOB_CREATED then ERROR QUEUE_ERROR", describe(first), describe(second))
			}
		})
	}
}

// isTimeoutErr reports whether err is a read deadline passing.
func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestGearmanGatewayDrainErrorKeepsOrder: the gateway's QUEUE_ERROR waits
// behind a reply an upstream still owes for an earlier pipelined request.
func TestGearmanGatewayDrainErrorKeepsOrder(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t)}, config.Breaker{})
	fn := st.fnOwnedBy(t, "f", 1)
	c := dialGW(t, st.addr)
	c.send(codec.SubmitJobBg, fn, "", "x")
	h := string(c.expect(codec.JobCreated).Args[0])
	st.srv.Drain()
	c.write(append(pkt(codec.GetStatus, h), pkt(codec.SubmitJobBg, fn, "", "late")...))
	if p1, p2 := c.next(), c.next(); p1.Type != codec.StatusRes || p2.Type != codec.Error {
		t.Fatalf("replies out of order: %v, then %v", p1.String(), p2.String())
	}
}

// TestGearmanGatewayIdleWhileForegroundRuns: a foreground job running
// through the gateway is work in hand, so a drain waits for it.
func TestGearmanGatewayIdleWhileForegroundRuns(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t)}, config.Breaker{})
	fn := st.fnOwnedBy(t, "f", 1)
	c := dialGW(t, st.addr)
	c.send(codec.SubmitJob, fn, "", "x")
	h := c.expect(codec.JobCreated).Args[0]
	w := dialGW(t, st.addr)
	w.send(codec.CanDo, fn)
	w.send(codec.GrabJob)
	w.expect(codec.JobAssign)
	st.srv.Drain()
	if st.srv.Idle() {
		t.Fatal("Idle while a foreground job runs through the gateway")
	}
	w.send(codec.WorkComplete, string(h), "done")
	c.expect(codec.WorkComplete)
	for deadline := time.Now().Add(5 * time.Second); !st.srv.Idle(); {
		if time.Now().After(deadline) {
			t.Fatal("not Idle after the foreground job completed")
		}
		time.Sleep(time.Millisecond)
	}
}
