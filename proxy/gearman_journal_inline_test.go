package proxy

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// TestGearmanJournalPipelinedInline runs the journal path the event loop
// writes itself (the never and interval policies) end to end: a client
// pipelines background submits and echoes while a worker takes and
// completes the jobs (their Delete records), on the loop and on
// goroutines. Every reply comes, in request order, and every job reaches
// the worker.
func TestGearmanJournalPipelinedInline(t *testing.T) {
	for _, policy := range []journal.SyncPolicy{journal.Never, journal.Interval(time.Millisecond)} {
		for _, goroutines := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/goroutines=%v", policy, goroutines), func(t *testing.T) {
				cfg := gearmanConfigForTest()
				cfg.Journal = openTestJournal(t, t.TempDir(), policy)
				addr := startJobgateGearmanServer(t, GearmanConfig{Engine: cfg, Goroutines: goroutines})
				nc, br := dialGearman(t, addr)
				wc, wbr := dialGearman(t, addr)
				nc.SetDeadline(time.Now().Add(10 * time.Second))
				wc.SetDeadline(time.Now().Add(10 * time.Second))
				wc.Write(codec.AppendPacket(nil, codec.Req, codec.CanDo, []byte("f")))
				const n = 200
				worked := make(chan error, 1)
				go func() { worked <- completeJobs(wc, wbr, n) }()
				var req []byte
				for range n {
					req = codec.AppendPacket(req, codec.Req, codec.SubmitJobBg, []byte("f"), nil, []byte("a"))
					req = codec.AppendPacket(req, codec.Req, codec.EchoReq, []byte("e"))
				}
				nc.Write(req)
				for i := range n {
					for _, want := range []codec.Type{codec.JobCreated, codec.EchoRes} {
						if p, err := readPacket(br); err != nil || p.Type != want {
							t.Fatalf("reply %d: got %v (%v), want %v", i, p, err, want)
						}
					}
				}
				if err := <-worked; err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// completeJobs is a worker on wc: it grabs and completes n jobs, sleeping
// with PRE_SLEEP until its NOOP when there is none.
func completeJobs(wc net.Conn, wbr *bufio.Reader, n int) error {
	for done := 0; done < n; {
		wc.Write(codec.AppendPacket(nil, codec.Req, codec.GrabJob))
		p, err := readPacket(wbr)
		if err != nil {
			return err
		}
		switch p.Type {
		case codec.NoJob:
			wc.Write(codec.AppendPacket(nil, codec.Req, codec.PreSleep))
			if p, err := readPacket(wbr); err != nil || p.Type != codec.Noop {
				return fmt.Errorf("after PRE_SLEEP: %v (%v), want NOOP", p, err)
			}
		case codec.JobAssign:
			wc.Write(codec.AppendPacket(nil, codec.Req, codec.WorkComplete, p.Args[0], []byte("r")))
			done++
		default:
			return fmt.Errorf("worker got %v", p)
		}
	}
	return nil
}
