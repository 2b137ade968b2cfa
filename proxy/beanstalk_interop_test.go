package proxy_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"
)

// TestBeanstalkGoClient drives jobgate, and the gateways in front of jobgate
// and of beanstalkd (bsGatewayStarts), with the go-beanstalk client, and the
// real beanstalkd the same way, so a failure on both is the test's.
func TestBeanstalkGoClient(t *testing.T) {
	t.Parallel()
	for _, start := range append([]func(testing.TB, int) bsServer{bsStartJobgate, bsStartJobgateGoroutines, bsStartReal}, bsGatewayStarts...) {
		srv := start(t, 0)
		t.Run(srv.name, func(t *testing.T) { bsGoClientScenario(t, srv.addr) })
	}
}

func bsGoClientScenario(t *testing.T, addr string) {
	c, err := gobeanstalk.DialTimeout("tcp", addr, bsReplyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	notFound := func(err error) {
		t.Helper()
		if !errors.Is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	}

	// Put, reserve, delete; a binary body with CRLF inside survives.
	body := []byte("bin\r\nary\x00\xff\r\n")
	id, err := c.Put(body, 10, 0, time.Minute)
	must(err)
	rid, got, err := c.Reserve(0)
	must(err)
	if rid != id || !bytes.Equal(got, body) {
		t.Fatalf("reserved %d %q, want %d %q", rid, got, id, body)
	}
	must(c.Delete(id))
	notFound(c.Delete(id))

	// Priorities, across tubes.
	hi := gobeanstalk.NewTube(c, "interop-hi")
	lo := gobeanstalk.NewTube(c, "interop-lo")
	idLo, err := lo.Put([]byte("lo"), 100, 0, time.Minute)
	must(err)
	idHi, err := hi.Put([]byte("hi"), 1, 0, time.Minute)
	must(err)
	ts := gobeanstalk.NewTubeSet(c, "interop-hi", "interop-lo")
	rid, _, err = ts.Reserve(time.Second)
	must(err)
	if rid != idHi {
		t.Fatalf("reserved %d, want the urgent job %d", rid, idHi)
	}
	// Release, bury, kick, peek.
	must(c.Release(idHi, 1, 0))
	rid, _, err = ts.Reserve(time.Second)
	must(err)
	must(c.Bury(rid, 5))
	bid, bbody, err := hi.PeekBuried()
	must(err)
	if bid != idHi || string(bbody) != "hi" {
		t.Fatalf("peek-buried %d %q", bid, bbody)
	}
	n, err := hi.Kick(10)
	must(err)
	if n != 1 {
		t.Fatalf("kicked %d", n)
	}
	pid, _, err := hi.PeekReady()
	must(err)
	if pid != idHi {
		t.Fatalf("peek-ready %d", pid)
	}
	must(c.Delete(idHi))
	must(c.Delete(idLo))

	// Delays, kick-job, peek-delayed.
	idD, err := hi.Put([]byte("later"), 1, time.Hour, time.Minute)
	must(err)
	did, _, err := hi.PeekDelayed()
	must(err)
	if did != idD {
		t.Fatalf("peek-delayed %d", did)
	}
	must(c.KickJob(idD))
	_, _, err = hi.PeekDelayed()
	notFound(err)
	idShort, err := hi.Put([]byte("soon"), 1, time.Second, time.Minute)
	must(err)
	start := time.Now()
	rid, _, err = ts.Reserve(5 * time.Second) // idD first (ready), then the delayed one
	must(err)
	must(c.Delete(rid))
	rid, _, err = ts.Reserve(5 * time.Second)
	must(err)
	if rid != idShort || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("reserved %d after %v, want %d after about 1 s", rid, time.Since(start), idShort)
	}

	// TTR: touch works, a reserve in the last second gets DEADLINE_SOON.
	must(c.Touch(idShort))
	must(c.Delete(idShort))
	idT, err := hi.Put([]byte("ttr"), 1, 0, time.Second)
	must(err)
	_, _, err = ts.Reserve(time.Second)
	must(err)
	_, _, err = ts.Reserve(time.Second)
	if !errors.Is(err, gobeanstalk.ErrDeadline) {
		t.Fatalf("second reserve: %v, want ErrDeadline", err)
	}
	must(c.Delete(idT))
	_, _, err = ts.Reserve(0)
	if !errors.Is(err, gobeanstalk.ErrTimeout) {
		t.Fatalf("empty reserve: %v, want ErrTimeout", err)
	}

	// reserve-job, stats, stats-job, stats-tube, list-tubes, pause.
	idR, err := hi.Put([]byte("r"), 1, 0, time.Minute)
	must(err)
	rb, err := c.ReserveJob(idR)
	must(err)
	if string(rb) != "r" {
		t.Fatalf("reserve-job body %q", rb)
	}
	sj, err := c.StatsJob(idR)
	must(err)
	if sj["state"] != "reserved" || sj["tube"] != "interop-hi" {
		t.Fatalf("stats-job %v", sj)
	}
	st, err := c.Stats()
	must(err)
	if st["current-jobs-reserved"] != "1" || st["max-job-size"] != "65535" {
		t.Fatalf("stats %v", st)
	}
	tubes, err := c.ListTubes()
	must(err)
	for _, want := range []string{"default", "interop-hi", "interop-lo"} {
		if !slices.Contains(tubes, want) {
			t.Fatalf("list-tubes %v lacks %s", tubes, want)
		}
	}
	must(hi.Pause(time.Minute))
	tst, err := hi.Stats()
	must(err)
	if tst["pause"] != "60" {
		t.Fatalf("stats-tube %v", tst)
	}
	_, err = gobeanstalk.NewTube(c, "nope").Stats()
	notFound(err)
}
