package proxy_test

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/proxy"
)

// Waking parked reserves: a put hands its job to a waiting reserve on
// another connection in the same pass of the loop. These tests pin what
// the woken clients see, and that a waiter whose client has gone loses no
// job. They run on both paths.

// bsWaitStat polls the server's stats (through go-beanstalk) until key
// has the value want.
func bsWaitStat(t *testing.T, addr, key, want string) {
	t.Helper()
	c, err := gobeanstalk.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(bsReplyTimeout)
	for {
		st, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st[key] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %s: %s, want %s", key, st[key], want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestBeanstalkLoopWakeManyParked: 32 clients wait in reserve, each with a
// command pipelined behind it; one write of 32 pipelined puts wakes every
// one of them. Each gets one job, no job goes to
// two, the pipelined command is answered after RESERVED, and afterwards
// nobody waits and every job is reserved.
func TestBeanstalkLoopWakeManyParked(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		const n = 32
		addr, _ := bsServe(t, proxy.BeanstalkConfig{})
		ws := make([]*bsConn, n)
		for i := range ws {
			ws[i] = bsDial(t, addr)
			defer ws[i].nc.Close()
			ws[i].send(t, "reserve\r\nlist-tube-used\r\n")
		}
		bsWaitStat(t, addr, "current-waiting", strconv.Itoa(n))
		p := bsDial(t, addr)
		defer p.nc.Close()
		var puts, inserted strings.Builder
		for i := range n {
			fmt.Fprintf(&puts, "put %d 0 10 1\r\n%c\r\n", n-i, 'a'+i%26)
			fmt.Fprintf(&inserted, "INSERTED %d\r\n", i+1)
		}
		p.send(t, puts.String())
		p.expect(t, inserted.String(), "the puts")
		var ids []int
		for i, w := range ws {
			r := w.readReply(t)
			var id, size int
			var body string
			if k, err := fmt.Sscanf(r, "RESERVED %d %d\r\n%s", &id, &size, &body); k != 3 || err != nil || size != 1 || id < 1 || id > n {
				t.Fatalf("waiter %d: got %q, want RESERVED of one of the jobs", i, r)
			}
			if want := string(rune('a' + (id-1)%26)); body != want {
				t.Fatalf("waiter %d: job %d with body %q, want %q", i, id, body, want)
			}
			ids = append(ids, id)
			w.expect(t, "USING default\r\n", "the command behind the reserve")
		}
		slices.Sort(ids)
		for i, id := range ids {
			if id != i+1 {
				t.Fatalf("jobs handed out %v, want each of 1..%d once", ids, n)
			}
		}
		bsWaitStat(t, addr, "current-waiting", "0")
		bsWaitStat(t, addr, "current-jobs-reserved", strconv.Itoa(n))
	})
}

// TestBeanstalkLoopWokenClientGone: a client that closes its connection
// while its reserve waits, racing a put that may hand it the job, loses
// nothing: whichever the server sees first, the job ends up ready (a job
// handed to the gone client goes back) and another client reserves it.
// Many rounds, so both orders happen.
func TestBeanstalkLoopWokenClientGone(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{})
		p := bsDial(t, addr)
		defer p.nc.Close()
		other := bsDial(t, addr)
		defer other.nc.Close()
		for round := range 20 {
			w := bsDial(t, addr)
			w.send(t, "reserve\r\n")
			bsWaitStat(t, addr, "current-waiting", "1")
			// The close and the put leave back to back; either may be
			// served first.
			w.nc.(*net.TCPConn).SetLinger(0) // a reset, as from a killed client
			w.nc.Close()
			p.send(t, "put 0 0 10 1\r\nx\r\n")
			p.expect(t, "INSERTED {n}\r\n", "the put")
			bsWaitStat(t, addr, "current-jobs-reserved", "0")
			bsWaitStat(t, addr, "current-waiting", "0")
			other.send(t, "reserve-with-timeout 0\r\n")
			r := other.readReply(t)
			var id int
			if _, err := fmt.Sscanf(r, "RESERVED %d 1\r\nx\r\n", &id); err != nil {
				t.Fatalf("round %d: got %q, want the job", round, r)
			}
			bsRoundTrip(t, other, fmt.Sprintf("delete %d\r\n", id), "DELETED\r\n")
		}
		bsWaitStat(t, addr, "current-jobs-ready", "0")
	})
}
