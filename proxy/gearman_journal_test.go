package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/jobserver/journal"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// openTestJournal opens a Gearman journal in dir, closed at the end of
// the test (after the server's Shutdown, which is registered later).
func openTestJournal(t testing.TB, dir string, sync journal.SyncPolicy) *gearman.FileJournal {
	t.Helper()
	fj, _, err := gearman.OpenJournal(dir, journal.Options{Sync: sync, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fj.Close() })
	return fj
}

// gatedJournal holds every ticket of a FileJournal until open is closed,
// to make the disk look slow.
type gatedJournal struct {
	*gearman.FileJournal
	open chan struct{}
	mu   sync.Mutex
	outs map[<-chan struct{}]*gatedTicket // one per batch of the journal
	// appended, if not nil, gets a token for each job record held.
	appended chan struct{}
}

type gatedTicket struct {
	inner gearman.Ticket
	done  chan struct{}
}

func (t *gatedTicket) Done() <-chan struct{} { return t.done }
func (t *gatedTicket) Wait() error           { <-t.done; return t.inner.Wait() }

// AppendQuiet, for the event loop's requests, is gated like AppendAsync.
func (g *gatedJournal) AppendQuiet(r journal.Record) (gearman.Ticket, error) { return g.AppendAsync(r) }

func (g *gatedJournal) AppendAsync(r journal.Record) (gearman.Ticket, error) {
	t, err := g.FileJournal.AppendAsync(r)
	if err != nil || r.Key == 0 { // the handle counter, written at start
		return t, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if gt := g.outs[t.Done()]; gt != nil {
		return gt, nil
	}
	gt := &gatedTicket{inner: t, done: make(chan struct{})}
	g.outs[t.Done()] = gt
	if g.appended != nil {
		g.appended <- struct{}{}
	}
	go func() {
		<-g.open
		t.Wait()
		close(gt.done)
	}()
	return gt, nil
}

func dialGearman(t testing.TB, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc, bufio.NewReader(nc)
}

// TestGearmanJournalReplyOrder pipelines SUBMIT_JOB_BG, ECHO_REQ and
// SUBMIT_JOB_BG on one connection with the Always policy: the replies come
// in request order, and while the journal is slow the event loop goes on
// serving other connections.
func TestGearmanJournalReplyOrder(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		name := "loop"
		if goroutines {
			name = "goroutines"
		}
		t.Run(name, func(t *testing.T) {
			g := &gatedJournal{
				FileJournal: openTestJournal(t, t.TempDir(), journal.Always),
				open:        make(chan struct{}),
				outs:        make(map[<-chan struct{}]*gatedTicket),
			}
			cfg := gearmanConfigForTest()
			cfg.Journal = g
			addr := startJobgateGearmanServer(t, GearmanConfig{Engine: cfg, Goroutines: goroutines})
			nc, br := dialGearman(t, addr)
			other, obr := dialGearman(t, addr)
			fn := []byte("f")
			var req []byte
			req = codec.AppendPacket(req, codec.Req, codec.SubmitJobBg, fn, nil, []byte("one"))
			req = codec.AppendPacket(req, codec.Req, codec.EchoReq, []byte("between"))
			req = codec.AppendPacket(req, codec.Req, codec.SubmitJobBg, fn, nil, []byte("two"))
			nc.Write(req)

			// The disk is "slow": another connection is still served.
			other.SetDeadline(time.Now().Add(5 * time.Second))
			other.Write(codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("ping")))
			if p, err := readPacket(obr); err != nil || p.Type != codec.EchoRes {
				t.Fatalf("other connection: %v %v", p, err)
			}
			// Nothing overtakes the first JOB_CREATED.
			nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := br.Peek(1); err == nil {
				t.Fatal("a reply arrived before the journal write completed")
			}
			close(g.open)
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			for _, want := range []string{`JOB_CREATED "H:test:1"`, `ECHO_RES "between"`, `JOB_CREATED "H:test:2"`} {
				p, err := readPacket(br)
				if err != nil {
					t.Fatal(err)
				}
				if got := describe(p); got != want {
					t.Fatalf("got %s, want %s", got, want)
				}
			}
		})
	}
}

// TestGearmanJournalPipelinedAlways is the same pipeline on the real
// journal with the Always policy, repeated, both serve modes.
func TestGearmanJournalPipelinedAlways(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		cfg := gearmanConfigForTest()
		cfg.Journal = openTestJournal(t, t.TempDir(), journal.Always)
		addr := startJobgateGearmanServer(t, GearmanConfig{Engine: cfg, Goroutines: goroutines})
		nc, br := dialGearman(t, addr)
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		var req []byte
		for i := 0; i < 50; i++ {
			req = codec.AppendPacket(req, codec.Req, codec.SubmitJobBg, []byte("f"), nil, []byte("a"))
			req = codec.AppendPacket(req, codec.Req, codec.EchoReq, []byte("e"))
			req = codec.AppendPacket(req, codec.Req, codec.GetStatus, []byte("H:test:1"))
		}
		nc.Write(req)
		for i := 0; i < 50; i++ {
			for _, want := range []codec.Type{codec.JobCreated, codec.EchoRes, codec.StatusRes} {
				p, err := readPacket(br)
				if err != nil || p.Type != want {
					t.Fatalf("goroutines=%v reply %d: got %v %v, want %v", goroutines, i, p, err, want)
				}
			}
		}
	}
}
