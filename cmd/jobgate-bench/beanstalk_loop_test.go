package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/proxy"
)

// bsDrivers are the ways the generator can drive its connections; every
// workload must count the same with each.
var bsDrivers = map[string][]string{
	"loop":       nil,
	"loops2":     {"-loops", "2"},
	"goroutines": {"-goroutines"},
}

// bsServers starts a real beanstalkd and jobgate's server in-process and
// returns their addresses.
func bsServers(t *testing.T) map[string]string {
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"beanstalkd": testutil.StartBeanstalkd(t),
		"jobgate":    testutil.Serve(t, srv),
	}
}

// bsCounts are the server-side counters a run is checked against.
type bsCounts struct {
	put, reserve, del, ready int64
}

// serverCounts reads the server's cmd-put, cmd-reserve-with-timeout and
// cmd-delete and tube's current-jobs-ready with a third-party client.
func serverCounts(t *testing.T, addr, tube string) bsCounts {
	t.Helper()
	c, err := beanstalk.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	num := func(m map[string]string, k string) int64 {
		v, err := strconv.ParseInt(m[k], 10, 64)
		if err != nil {
			t.Fatalf("stats %s: %q", k, m[k])
		}
		return v
	}
	n := bsCounts{put: num(st, "cmd-put"), reserve: num(st, "cmd-reserve-with-timeout"), del: num(st, "cmd-delete")}
	ts, err := beanstalk.NewTube(c, tube).Stats()
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return n // no job and no client: the tube is gone
		}
		t.Fatal(err)
	}
	n.ready = num(ts, "current-jobs-ready")
	return n
}

var jobsLine = regexp.MustCompile(`(?m)^jobs=([0-9]+) `)

// TestBeanstalkCountsMatchServer runs every workload, with each driver,
// against a real beanstalkd and against jobgate, and checks that the
// server counted the commands the generator's report implies: the closed
// loops send exactly what they report, plus at most one command per
// connection after a timed run's stop.
func TestBeanstalkCountsMatchServer(t *testing.T) {
	type check func(t *testing.T, jobs int64, d bsCounts)
	const n, conns = 300, 2
	exact := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: server counted %d, want %d", what, got, want)
		}
	}
	cases := []struct {
		name  string
		args  []string
		check check
	}{
		{"put-keep", []string{"-workload", "put", "-n", "300", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			exact("jobs reported", jobs, n)
			exact("cmd-put", d.put, n)
			exact("current-jobs-ready", d.ready, n)
			exact("cmd-delete", d.del, 0)
		}},
		{"put-cleanup", []string{"-workload", "put", "-n", "300"}, func(t *testing.T, jobs int64, d bsCounts) {
			exact("jobs reported", jobs, n)
			exact("cmd-put", d.put, n)
			exact("cmd-delete (cleanup)", d.del, n)
			exact("current-jobs-ready", d.ready, 0)
		}},
		{"put-16k", []string{"-workload", "put", "-n", "300", "-body-size", "16384", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			exact("jobs reported", jobs, n)
			exact("cmd-put", d.put, n)
			exact("current-jobs-ready", d.ready, n)
		}},
		{"pipelined", []string{"-workload", "pipelined-put", "-n", "300", "-pipeline", "10", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			exact("jobs reported", jobs, n)
			exact("cmd-put", d.put, n)
			exact("current-jobs-ready", d.ready, n)
		}},
		{"pipelined-16k", []string{"-workload", "pipelined-put", "-n", "300", "-pipeline", "50", "-body-size", "16384", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			// 800 KiB batches: more than a socket takes at once, so the
			// loop keeps the rest and writes it on EPOLLOUT.
			exact("jobs reported", jobs, n)
			exact("cmd-put", d.put, n)
			exact("current-jobs-ready", d.ready, n)
		}},
		{"reserve-delete", []string{"-workload", "reserve-delete", "-n", "300", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			exact("jobs reported", jobs, n)
			exact("cmd-put (prefill)", d.put, n)
			exact("cmd-delete", d.del, n)
			if d.reserve < n || d.reserve > n+conns {
				t.Errorf("cmd-reserve-with-timeout %d, want %d to %d", d.reserve, n, n+conns)
			}
			exact("current-jobs-ready", d.ready, 0)
		}},
		{"reserve-delete-16k", []string{"-workload", "reserve-delete", "-n", "300", "-body-size", "16384", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			exact("jobs reported", jobs, n)
			exact("cmd-delete", d.del, n)
			exact("current-jobs-ready", d.ready, 0)
		}},
		{"reserve-delete-timed", []string{"-workload", "reserve-delete", "-duration", "200ms", "-prefill", "3000", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			exact("cmd-put (prefill)", d.put, 3000)
			if jobs <= 0 || d.del < jobs || d.del > jobs+conns {
				t.Errorf("reported %d jobs, server counted %d deletes (want %d to %d)", jobs, d.del, jobs, jobs+conns)
			}
			exact("current-jobs-ready", d.ready, 3000-d.del)
		}},
		{"put-timed", []string{"-workload", "put", "-duration", "200ms", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			if jobs <= 0 || d.put < jobs || d.put > jobs+conns {
				t.Errorf("reported %d jobs, server counted %d puts (want %d to %d)", jobs, d.put, jobs, jobs+conns)
			}
			exact("current-jobs-ready", d.ready, d.put)
		}},
		{"cycle", []string{"-workload", "cycle", "-n", "300", "-keep"}, func(t *testing.T, jobs int64, d bsCounts) {
			exact("jobs reported", jobs, n)
			exact("cmd-put", d.put, n)
			exact("cmd-delete", d.del, n)
			if d.reserve < n {
				t.Errorf("cmd-reserve-with-timeout %d, want at least %d", d.reserve, n)
			}
			exact("current-jobs-ready", d.ready, 0)
		}},
	}
	for sname, addr := range bsServers(t) {
		for dname, dargs := range bsDrivers {
			for i, tc := range cases {
				t.Run(sname+"/"+dname+"/"+tc.name, func(t *testing.T) {
					tube := fmt.Sprintf("t-%s-%d", dname, i)
					before := serverCounts(t, addr, tube)
					args := append([]string{"-addr", addr, "-tube", tube, "-conns", strconv.Itoa(conns),
						"-producers", "2", "-consumers", "2"}, tc.args...)
					var out, errb bytes.Buffer
					if code := runBeanstalk(append(args, dargs...), &out, &errb); code != 0 {
						t.Fatalf("code %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
					}
					m := jobsLine.FindStringSubmatch(out.String())
					if m == nil {
						t.Fatalf("no jobs= in\n%s", out.String())
					}
					jobs, _ := strconv.ParseInt(m[1], 10, 64)
					after := serverCounts(t, addr, tube)
					tc.check(t, jobs, bsCounts{put: after.put - before.put, reserve: after.reserve - before.reserve,
						del: after.del - before.del, ready: after.ready})
				})
			}
		}
	}
}

// TestBeanstalkTimedCycleLatencies: after a timed cycle's stop the
// consumers drain the backlog, which is neither counted nor timed: the
// reserve+delete latencies are those of the counted jobs, plus at most
// the one in flight per consumer at the stop.
func TestBeanstalkTimedCycleLatencies(t *testing.T) {
	samples := regexp.MustCompile(`(?m)^jobs=([0-9]+) .* reserve\+delete p50=\S+ p99=\S+ samples=([0-9]+)`)
	addr := bsServers(t)["beanstalkd"]
	for dname, dargs := range bsDrivers {
		t.Run(dname, func(t *testing.T) {
			args := append([]string{"-addr", addr, "-tube", "t-timed-cycle-" + dname, "-workload", "cycle",
				"-producers", "2", "-consumers", "2", "-duration", "300ms"}, dargs...)
			var out, errb bytes.Buffer
			if code := runBeanstalk(args, &out, &errb); code != 0 {
				t.Fatalf("code %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
			}
			m := samples.FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no jobs and samples in\n%s", out.String())
			}
			jobs, _ := strconv.ParseInt(m[1], 10, 64)
			n, _ := strconv.ParseInt(m[2], 10, 64)
			if jobs <= 0 || n < jobs || n > jobs+2 {
				t.Fatalf("%d jobs counted, %d latencies recorded; want %d to %d", jobs, n, jobs, jobs+2)
			}
		})
	}
}

// closingServer answers the setup commands and puts like beanstalkd, never
// answers a reserve, and after closeAfter puts closes every connection.
func closingServer(t *testing.T, closeAfter int) string {
	l := testutil.Listen(t)
	var mu sync.Mutex
	var conns []net.Conn
	puts := 0
	closed := false
	closeAll := func() {
		closed = true
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		closeAll()
	})
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				nc.Close()
			}
			conns = append(conns, nc)
			mu.Unlock()
			go func() {
				r := bufio.NewReader(nc)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					f := strings.Fields(line)
					var reply string
					switch f[0] {
					case "use":
						reply = "USING " + f[1]
					case "watch":
						reply = "WATCHING 2"
					case "ignore":
						reply = "WATCHING 1"
					case "put":
						size, _ := strconv.Atoi(f[4])
						if _, err := r.Discard(size + 2); err != nil {
							return
						}
						mu.Lock()
						puts++
						if puts > closeAfter {
							closeAll()
						}
						reply = "INSERTED " + strconv.Itoa(puts)
						mu.Unlock()
					default:
						continue // a reserve waits forever
					}
					if _, err := nc.Write([]byte(reply + "\r\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestBeanstalkServerClosesMidRun: a server that closes the connections in
// the middle of a run ends it with an error, not a hang, whatever waits
// on them (producers in a put, consumers in a reserve).
func TestBeanstalkServerClosesMidRun(t *testing.T) {
	for dname, dargs := range bsDrivers {
		for _, wl := range []string{"put", "pipelined-put", "cycle"} {
			t.Run(dname+"/"+wl, func(t *testing.T) {
				addr := closingServer(t, 200)
				args := append([]string{"-addr", addr, "-workload", wl, "-duration", "30s", "-pipeline", "10"}, dargs...)
				var out, errb bytes.Buffer
				code := make(chan int, 1)
				go func() { code <- runBeanstalk(args, &out, &errb) }()
				select {
				case c := <-code:
					if c != 1 || !strings.Contains(errb.String(), addr) {
						t.Fatalf("code %d, want 1 with an error\nstdout: %s\nstderr: %s", c, out.String(), errb.String())
					}
				case <-time.After(20 * time.Second):
					t.Fatal("the run did not end after the server closed the connections")
				}
			})
		}
	}
}

// recordReplies is a bsReplyHandler that writes down what it gets.
type recordReplies struct{ got []string }

func (r *recordReplies) reply(kind wire.ReplyKind, id uint64) error {
	r.got = append(r.got, fmt.Sprintf("%s %d", kind, id))
	return nil
}

// TestBsRepliesSplitEverywhere feeds the loop's reply parser a stream cut
// at every byte, and bad replies, which must be errors.
func TestBsRepliesSplitEverywhere(t *testing.T) {
	stream := "INSERTED 1\r\nRESERVED 7 5\r\nhe\r\no\r\nDELETED\r\nTIMED_OUT\r\nRESERVED 8 0\r\n\r\nINSERTED 18446744073709551615\r\n"
	want := "INSERTED 1,RESERVED 7,DELETED 0,TIMED_OUT 0,RESERVED 8,INSERTED 18446744073709551615"
	for cut := range len(stream) + 1 {
		var h recordReplies
		p := bsReplies{in: make([]byte, 256)}
		for _, part := range []string{stream[:cut], stream[cut:]} {
			p.end += copy(p.in[p.end:], part)
			if err := p.parse(&h); err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
		}
		if got := strings.Join(h.got, ","); got != want || p.end != 0 {
			t.Fatalf("cut %d: got %s (%d bytes left), want %s", cut, got, p.end, want)
		}
	}
	for _, bad := range []string{
		"NOT_FOUND\r\n", "INSERTED\r\n", "INSERTED x\r\n", "INSERTED 1 \r\n", "INSERTED 0\r\n",
		"RESERVED 7\r\n", "RESERVED 7 5 \r\n", "RESERVED 7 2\r\nabXY", "DRAINING\r\n",
		"INSERTED 99999999999999999999\r\n", "deleted\r\n", strings.Repeat("x", 300),
	} {
		var h recordReplies
		p := bsReplies{in: make([]byte, 512)}
		p.end = copy(p.in, bad)
		if err := p.parse(&h); err == nil {
			t.Errorf("%q: no error (got %v)", bad, h.got)
		}
	}
}
