package proxy_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/internal/testutil"
)

// TestBeanstalkGatewayClientCounts: through a gateway sharding over the
// local engine and two beanstalkd, stats counts the client connections
// and their commands as one beanstalkd counts its own, although each
// client has sessions on several backends, a waiting reserve waits on all
// of them, and the gateway sends watch, reserve and stats to several
// backends. A real beanstalkd run through the same steps is the
// reference.
func TestBeanstalkGatewayClientCounts(t *testing.T) {
	var want map[string]string
	t.Run("beanstalkd", func(t *testing.T) { want = checkClientCounts(t, testutil.StartBeanstalkd(t)) })
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("gateway, goroutines %v", goroutines), func(t *testing.T) {
			got := checkClientCounts(t, bgwStartOn(t, goroutines, 2, true).addr)
			for k, v := range want {
				// cmd-stats counts waitCounts' polls.
				if strings.HasPrefix(k, "cmd-") && k != "cmd-stats" && got[k] != v {
					t.Errorf("%s: %s, beanstalkd %s", k, got[k], v)
				}
			}
		})
	}
}

// checkClientCounts runs clients through puts, reserves and a waiting
// reserve on addr, checks the connection counts of stats along the way,
// and returns the last stats.
func checkClientCounts(t *testing.T, addr string) map[string]string {
	producer := bgwDial(t, addr)
	id, err := gobeanstalk.NewTube(producer, "counts-put").Put([]byte("x"), 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	taker := bgwDial(t, addr) // a worker by reserve-job
	if _, err := taker.ReserveJob(id); err != nil {
		t.Fatal(err)
	}
	idle := bgwDial(t, addr)
	if _, _, err := idle.Reserve(0); !bsTimedOut(err) { // a worker, not waiting
		t.Fatalf("reserve-with-timeout 0 on an empty tube: %v", err)
	}
	waiter := bgwDial(t, addr) // waits on a tube no job is put in
	ts := gobeanstalk.NewTubeSet(waiter, "counts-empty")
	waited := make(chan error, 1)
	go func() {
		_, _, err := ts.Reserve(time.Minute)
		waited <- err
	}()
	asker := bgwDial(t, addr)
	want := map[string]uint64{"current-connections": 5, "current-producers": 1, "current-workers": 3, "current-waiting": 1}
	waitCounts(t, asker, want)
	waiter.Close()
	<-waited
	want["current-connections"], want["current-workers"], want["current-waiting"] = 4, 2, 0
	waitCounts(t, asker, want)
	producer.Close()
	want["current-connections"], want["current-producers"] = 3, 0
	waitCounts(t, asker, want)
	// A put too big counts in cmd-put.
	big := make([]byte, 70000)
	if _, err := gobeanstalk.NewTube(taker, "counts-put").Put(big, 1, 0, time.Minute); err == nil {
		t.Fatal("a 70000-byte put was taken")
	}
	st, err := asker.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// bsTimedOut reports whether err is go-beanstalk's TIMED_OUT.
func bsTimedOut(err error) bool {
	ce, ok := err.(gobeanstalk.ConnError)
	return ok && ce.Err == gobeanstalk.ErrTimeout
}

// waitCounts polls stats on c until its fields are want; total-connections
// must be at least current-connections.
func waitCounts(t *testing.T, c *gobeanstalk.Conn, want map[string]uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for k := range want {
			got[k], _ = strconv.ParseUint(st[k], 10, 64)
		}
		total, _ := strconv.ParseUint(st["total-connections"], 10, 64)
		if fmt.Sprint(got) == fmt.Sprint(want) && total >= got["current-connections"] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %v (total-connections %d), want %v", got, total, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
