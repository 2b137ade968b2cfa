package proxy_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/routing"
)

// pollReady waits until the beanstalkd at addr has want ready jobs in tube.
func pollReady(t *testing.T, addr, tube string, want int) {
	t.Helper()
	c := bgwDial(t, addr)
	var st map[string]string
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err = gobeanstalk.NewTube(c, tube).Stats()
		if err == nil && st["current-jobs-ready"] == strconv.Itoa(want) {
			return
		}
	}
	t.Fatalf("tube %s on %s: %v %v, want %d ready", tube, addr, st, err, want)
}

// TestBeanstalkGatewayCloseReleases has a client reserve a job on every
// backend and hang up: every backend has its job ready again, and another
// client gets them all.
func TestBeanstalkGatewayCloseReleases(t *testing.T) {
	t.Parallel()
	cl := bgwStart(t, 2, true)
	tubes := cl.tubesOnEveryBackend(1)
	p := bgwDial(t, cl.addr)
	for _, tube := range tubes {
		_, err := gobeanstalk.NewTube(p, tube).Put([]byte(tube), 1, 0, time.Minute)
		must(t, err)
	}
	a, err := gobeanstalk.DialTimeout("tcp", cl.addr, bsReplyTimeout)
	must(t, err)
	as := gobeanstalk.NewTubeSet(a, tubes...)
	for range tubes {
		_, _, err := as.Reserve(time.Second)
		must(t, err)
	}
	for _, tube := range tubes {
		if id := cl.owner(tube); id != routing.LocalID {
			pollReady(t, cl.ups[id], tube, 0)
		}
	}
	a.Close()
	for _, tube := range tubes {
		if id := cl.owner(tube); id != routing.LocalID {
			pollReady(t, cl.ups[id], tube, 1)
		}
	}
	b := bgwDial(t, cl.addr)
	bs := gobeanstalk.NewTubeSet(b, tubes...)
	got := map[string]bool{}
	for range tubes {
		id, body, err := bs.Reserve(2 * time.Second)
		must(t, err)
		got[string(body)] = true
		must(t, b.Delete(id))
	}
	if len(got) != len(tubes) {
		t.Fatalf("got %v, want one job of each of %v", got, tubes)
	}
}

// TestBeanstalkGatewayReserveLosersGiveBack puts a job on each of two
// backends and reserves once over both: the backend whose job was not
// handed out holds none reserved, so a direct look at the upstream and a
// second reserve find it.
func TestBeanstalkGatewayReserveLosersGiveBack(t *testing.T) {
	t.Parallel()
	for _, local := range []bool{false, true} {
		t.Run("local="+strconv.FormatBool(local), func(t *testing.T) {
			t.Parallel()
			n := 2
			if local {
				n = 1
			}
			cl := bgwStart(t, n, local)
			tubes := cl.tubesOnEveryBackend(1)
			c := bgwDial(t, cl.addr)
			for round := range 5 {
				for _, tube := range tubes {
					_, err := gobeanstalk.NewTube(c, tube).Put([]byte(tube), uint32(round), 0, time.Minute)
					must(t, err)
				}
				ts := gobeanstalk.NewTubeSet(c, tubes...)
				id1, body1, err := ts.Reserve(0)
				must(t, err)
				// The loser's job is ready again on its backend.
				for _, tube := range tubes {
					if tube == string(body1) {
						continue
					}
					if id := cl.owner(tube); id != routing.LocalID {
						pollReady(t, cl.ups[id], tube, 1)
					}
				}
				id2, body2, err := ts.Reserve(2 * time.Second)
				must(t, err)
				if string(body1) == string(body2) {
					t.Fatalf("round %d: reserved %s twice", round, body1)
				}
				must(t, c.Delete(id1))
				must(t, c.Delete(id2))
			}
		})
	}
}

// TestBeanstalkGatewayReserveWaitsOnAll has a worker wait on two backends
// with nothing ready: a job put on either reaches it, and the abandoned
// wait on the other backend does not take the next job there, not even
// for a moment: that job has never been reserved (a job given back would
// count a reserve, which clients such as Laravel count as an attempt).
// Both with the gateway's connections on its event loop and on goroutines.
func TestBeanstalkGatewayReserveWaitsOnAll(t *testing.T) {
	t.Parallel()
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("goroutines=%v", goroutines), func(t *testing.T) {
			t.Parallel()
			testReserveWaitsOnAll(t, goroutines)
		})
	}
}

// testReserveWaitsOnAll is TestBeanstalkGatewayReserveWaitsOnAll in one
// of the gateway's modes.
func testReserveWaitsOnAll(t *testing.T, goroutines bool) {
	cl := bgwStartOn(t, goroutines, 2, false)
	tubes := cl.tubesOnEveryBackend(1)
	w := bgwDial(t, cl.addr)
	p := bgwDial(t, cl.addr)
	ts := gobeanstalk.NewTubeSet(w, tubes...)
	for _, tube := range tubes {
		type res struct {
			id   uint64
			body []byte
			err  error
		}
		ch := make(chan res, 1)
		go func() {
			id, body, err := ts.Reserve(10 * time.Second)
			ch <- res{id, body, err}
		}()
		// Wait until both backends have the worker's wait.
		for _, addr := range cl.ups {
			d := bgwDial(t, addr)
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				st, err := d.Stats()
				must(t, err)
				if st["current-waiting"] == "1" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: no wait: %v", addr, st)
				}
			}
		}
		_, err := gobeanstalk.NewTube(p, tube).Put([]byte(tube), 1, 0, time.Minute)
		must(t, err)
		r := <-ch
		must(t, r.err)
		if string(r.body) != tube {
			t.Fatalf("reserved %q, want %q", r.body, tube)
		}
		must(t, w.Delete(r.id))
		// The other backend's abandoned wait takes nothing put now.
		for _, other := range tubes {
			if other == tube {
				continue
			}
			_, err := gobeanstalk.NewTube(p, other).Put([]byte("later"), 1, 0, time.Minute)
			must(t, err)
			up := cl.ups[cl.owner(other)]
			pollReady(t, up, other, 1)
			d := bgwDial(t, up)
			upID, _, err := gobeanstalk.NewTube(d, other).PeekReady()
			must(t, err)
			st, err := d.StatsJob(upID)
			must(t, err)
			if st["reserves"] != "0" || st["releases"] != "0" {
				t.Errorf("job put after the race on %s: reserves %s, releases %s; want 0 and 0", other, st["reserves"], st["releases"])
			}
			id, _, err := gobeanstalk.NewTubeSet(p, other).Reserve(2 * time.Second)
			must(t, err)
			must(t, p.Delete(id))
		}
	}
}
