//go:build linux

package proxy_test

import (
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/config"
)

// TestBeanstalkGatewayLoopWatchChanges moves one client's watch list
// between tubes owned by different beanstalkd, reserving on the event loop
// after each move: every reserve goes to the backend the new list lives
// on (the session's cached reserve targets follow watch and ignore), and
// the client gets the job it put there.
func TestBeanstalkGatewayLoopWatchChanges(t *testing.T) {
	t.Parallel()
	// Tubes a and b each live on one backend; the default tube, sharded
	// over both, is ignored by the first reserve's tube set.
	const a, b = "on-one", "on-two"
	owner := map[string]int{a: 1, b: 2}
	cl := bgwStart(t, 2, false, func(c *config.Config) {
		c.Routes.Beanstalk = []config.Route{{Exact: a, Backend: "bs-1"}, {Exact: b, Backend: "bs-2"}}
	})
	gc := bgwDial(t, cl.addr)
	for round := range 3 {
		for _, tube := range []string{a, b, a} {
			body := []byte(tube + " job")
			id, err := gobeanstalk.NewTube(gc, tube).Put(body, 1, 0, time.Minute)
			must(t, err)
			rid, got, err := gobeanstalk.NewTubeSet(gc, tube).Reserve(5 * time.Second)
			if err != nil {
				t.Fatalf("round %d: reserve watching only %s: %v", round, tube, err)
			}
			if rid != id || string(got) != string(body) {
				t.Fatalf("round %d: reserved %d %q watching %s, want %d %q", round, rid, got, tube, id, body)
			}
			if be, _ := split(rid); be != owner[tube] {
				t.Fatalf("round %d: job of %s from backend %d, want %d", round, tube, be, owner[tube])
			}
			must(t, gc.Delete(rid))
		}
	}
	// Off the loop: the first command to each backend (it dials), and
	// nothing else, the reserves included.
	if on, off, _ := loopCounts(t, cl.srv); off > 2 {
		t.Fatalf("%d commands on the loop and %d off it; want the reserves on it", on, off)
	}
}
