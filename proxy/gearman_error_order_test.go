package proxy

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// tooLongUnique is a SUBMIT_JOB_BG the codec refuses, without closing the
// connection, with ERROR ARGUMENT_TOO_LARGE (a unique id over 64 bytes).
func tooLongUnique(fn string) []byte {
	return codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte(fn), bytes.Repeat([]byte("u"), 100), []byte("b"))
}

// TestGearmanProtocolErrorKeepsOrder: the ERROR for a malformed request
// comes after the replies owed for the requests before it (DESIGN
// decision 4), here a JOB_CREATED the journal still holds; otherwise a
// client pins the error on the earlier submit.
func TestGearmanProtocolErrorKeepsOrder(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("goroutines=%v", goroutines), func(t *testing.T) {
			cfg := gearmanConfigForTest()
			cfg.Journal = openTestJournal(t, t.TempDir(), journal.Never)
			addr := startJobgateGearmanServer(t, GearmanConfig{Engine: cfg, Goroutines: goroutines})
			nc, br := dialGearman(t, addr)
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			req := codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte("f"), nil, []byte("a"))
			nc.Write(append(req, tooLongUnique("f")...))
			for _, want := range []string{`JOB_CREATED "H:test:1"`, `ERROR "ARGUMENT_TOO_LARGE"`} {
				p, err := readPacket(br)
				if err != nil {
					t.Fatal(err)
				}
				if got := describe(p); len(got) < len(want) || got[:len(want)] != want {
					t.Fatalf("got %s, want %s first", got, want)
				}
			}
		})
	}
}

// TestGearmanGatewayProtocolErrorKeepsOrder: through the gateway, the
// ERROR for a malformed request waits behind the reply an upstream still
// owes for the request before it.
func TestGearmanGatewayProtocolErrorKeepsOrder(t *testing.T) {
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t)}, config.Breaker{})
	fn := st.fnOwnedBy(t, "f", 1)
	c := dialGW(t, st.addr)
	c.write(append(pkt(codec.SubmitJobBg, fn, "", "x"), tooLongUnique(fn)...))
	if p1, p2 := c.next(), c.next(); p1.Type != codec.JobCreated || p2.Type != codec.Error {
		t.Fatalf("replies out of order: %v, then %v", p1.String(), p2.String())
	}
}
