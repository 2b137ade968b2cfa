package proxy_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"
)

// bsTLSClient is go-beanstalk over a TLS connection to the fixture.
func (f *tlsFixture) bsTLSClient(t *testing.T) *gobeanstalk.Conn {
	t.Helper()
	tc, err := dialTLS(t, f.beanstalkTLS, f.clientConf())
	if err != nil {
		t.Fatal(err)
	}
	tc.SetDeadline(time.Time{}) // go-beanstalk's own timeouts; the test bounds each wait
	return gobeanstalk.NewConn(tc)
}

// waiting polls stats until current-waiting is n.
func waiting(t *testing.T, c *gobeanstalk.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(tlsTimeout)
	for {
		st, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st["current-waiting"] == strconv.Itoa(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("current-waiting %s, want %d", st["current-waiting"], n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTLSBeanstalkGoClient: go-beanstalk over crypto/tls puts, reserves
// and deletes, and sees the jobs a plain-TCP client put (one server).
func TestTLSBeanstalkGoClient(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{})
	c := f.bsTLSClient(t)
	defer c.Close()
	body := []byte("over\r\ntls\x00")
	id, err := c.Put(body, 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rid, got, err := c.Reserve(0)
	if err != nil || rid != id || !bytes.Equal(got, body) {
		t.Fatalf("reserve: %d %q %v, want %d %q", rid, got, err, id, body)
	}
	if err := c.Delete(id); err != nil {
		t.Fatal(err)
	}
	plain, err := gobeanstalk.DialTimeout("tcp", f.beanstalkPlain, tlsTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	id, err = plain.Put([]byte("from plain"), 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if rid, got, err := c.Reserve(0); err != nil || rid != id || string(got) != "from plain" {
		t.Fatalf("TLS reserve of a plain put: %d %q %v", rid, got, err)
	}
}

// TestTLSBeanstalkBlockingReserve: a reserve waiting over TLS is answered
// when a job arrives (the server wakes its read-ahead with a past read
// deadline, which must not break the TLS connection), and the connection
// goes on working after it.
func TestTLSBeanstalkBlockingReserve(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{})
	w := f.bsTLSClient(t)
	defer w.Close()
	p := f.bsTLSClient(t)
	defer p.Close()
	type res struct {
		id   uint64
		body []byte
		err  error
	}
	for round := range 3 {
		got := make(chan res, 1)
		go func() {
			id, body, err := w.Reserve(tlsTimeout)
			got <- res{id, body, err}
		}()
		waiting(t, p, 1)
		want := []byte("job " + strconv.Itoa(round))
		id, err := p.Put(want, 1, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r := <-got // reserve-with-timeout bounds it
		if r.err != nil || r.id != id || !bytes.Equal(r.body, want) {
			t.Fatalf("round %d: reserved %d %q %v, want %d %q", round, r.id, r.body, r.err, id, want)
		}
		if err := w.Delete(id); err != nil {
			t.Fatalf("round %d: delete after the wait: %v", round, err)
		}
	}
}

// TestTLSBeanstalkHangupDuringReserve: a TLS client that hangs up while
// its reserve waits is noticed (the read-ahead sees the close), so the next
// job is not handed to it but stays ready for others.
func TestTLSBeanstalkHangupDuringReserve(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{})
	tc, err := dialTLS(t, f.beanstalkTLS, f.clientConf())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Write([]byte("reserve\r\n")); err != nil {
		t.Fatal(err)
	}
	p := f.bsTLSClient(t)
	defer p.Close()
	waiting(t, p, 1)
	tc.Close()
	waiting(t, p, 0)
	id, err := p.Put([]byte("for the living"), 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.StatsJob(id)
	if err != nil || st["state"] != "ready" {
		t.Fatalf("job state %q %v, want ready", st["state"], err)
	}
	if rid, _, err := p.Reserve(0); err != nil || rid != id {
		t.Fatalf("reserve: %d %v", rid, err)
	}
}
