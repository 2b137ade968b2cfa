package upstream

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing"
)

// TestGearmanAdminTagged checks, against a real gearmand, that Admin's
// connection carries GearmanAdminClientID before its command runs (the
// binary SET_CLIENT_ID then the text line on one connection), and that
// concurrent Admin calls never see another of them, or a health probe,
// untagged.
func TestGearmanAdminTagged(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 3*time.Second)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				lines, err := g.Admin(context.Background(), "workers")
				if err != nil {
					errs <- err.Error()
					return
				}
				tagged := 0
				for _, l := range lines {
					f := strings.SplitN(l, " ", 3)
					if len(f) == 3 && f[2] == GearmanAdminClientID+" :" {
						tagged++
					} else {
						errs <- "an untagged connection: " + l
					}
				}
				if tagged == 0 {
					errs <- "its own connection is not listed with the tag: " + strings.Join(lines, "|")
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if err := g.Probe(context.Background()); err != nil {
					errs <- "probe: " + err.Error()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestGearmanAdminWaitIsNotTransport checks that an Admin or Probe that
// gave up waiting for another admin connection of the same server fails
// without the error a breaker counts: the server did nothing wrong.
func TestGearmanAdminWaitIsNotTransport(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 3*time.Second)
	g.admin <- struct{}{} // another admin connection is open
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.Admin(ctx, "status"); err == nil || routing.IsTransport(err) {
		t.Fatalf("admin while another runs: %v (transport %v)", err, routing.IsTransport(err))
	}
	if err := g.Probe(ctx); err == nil || routing.IsTransport(err) {
		t.Fatalf("probe while another runs: %v", err)
	}
	<-g.admin
	if _, err := g.Admin(context.Background(), "status"); err != nil {
		t.Fatalf("admin once free: %v", err)
	}
}
