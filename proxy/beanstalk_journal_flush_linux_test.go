//go:build linux

package proxy_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/proxy"
)

// TestBeanstalkJournalPutServedByFlush: the event loop serves commands
// while it flushes, too (a connection whose replies had backed up past the
// output limit is served again once they drain). A put served there has its
// record queued for the loop to write; the loop must write it before it
// waits for the next event, under every policy, or the put is answered
// only when some other connection happens to send a command.
func TestBeanstalkJournalPutServedByFlush(t *testing.T) {
	for _, policy := range []journal.SyncPolicy{journal.Never, journal.Always, journal.Interval(50 * time.Millisecond)} {
		t.Run(policy.String(), func(t *testing.T) {
			fj, _, err := engine.OpenJournal(t.TempDir(), journal.Options{Sync: policy, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer fj.Close()
			srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{EngineConfig: engine.Config{Journal: fj}})
			if err != nil {
				t.Fatal(err)
			}
			addr, stop := testutil.ServeOn(t, srv, testutil.Listen(t))
			defer stop()
			c := bsDial(t, addr)
			body := strings.Repeat("b", 60000)
			c.send(t, fmt.Sprintf("put 0 0 60 %d\r\n%s\r\n", len(body), body))
			c.expect(t, "INSERTED 1\r\n", "first put")
			for round := range 5 {
				// Five 60 KB peeks fill the output past its limit, so the
				// put behind them is served only as the output drains.
				c.send(t, strings.Repeat("peek 1\r\n", 5)+"put 0 0 60 1\r\nx\r\n")
				for k := range 5 {
					if r := c.readReply(t); !strings.HasPrefix(r, "FOUND 1 ") {
						t.Fatalf("round %d, peek %d: %q", round, k, r)
					}
				}
				c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				line, err := c.br.ReadString('\n')
				if err != nil {
					t.Fatalf("round %d: the put behind the peeks is unanswered after 5 s (%v)", round, err)
				}
				if want := fmt.Sprintf("INSERTED %d\r\n", round+2); line != want {
					t.Fatalf("round %d: %q, want %q", round, line, want)
				}
			}
		})
	}
}
