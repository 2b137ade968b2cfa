package proxy_test

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBeanstalkDifferentialWait is the differential test with waiting in
// it: on four connections each to jobgate and to beanstalkd, besides every
// command TestBeanstalkDifferential sends, connections block in reserve
// and reserve-with-timeout 1000 (which never runs out here), close, quit
// or half-close while holding jobs or waiting, and are replaced by new
// ones. Every connection must receive the same replies in the same order:
// which waiting connection gets a new job, a job going back to ready when
// its holder leaves, the stats counters while connections wait.
//
// Synchronising without sleeping: after each step, every connection that
// does not wait sends list-tube-used and is read up to its USING line:
// what comes before is its output of the step (the stepping connection's
// first reply, which may be a USING too, is the step's own); this is done
// twice. A waiting connection gets no command, so whether its reply came
// in the step is read without blocking once the two rounds are back. That
// holds because both servers write a reply a step caused before they read
// a later command from another connection: jobgate's loop reads the
// connections epoll reports, then flushes every connection that got
// output (the waiting one's reply included) before it polls again;
// beanstalkd takes one epoll event at a time and, while handling the
// command that hands a job to a waiting connection, asks epoll to report
// that connection writable, which puts it in the kernel's ready list ahead
// of any sync sent later. Loopback delivers a write to the peer's socket
// within the write call, and the second round leaves a margin. Should one
// server's reply still be missing when the other's is there, the test
// waits for it with a deadline and logs it (a slow delivery then costs
// time, not a false failure; a real divergence still fails).
//
// A reserve that may wait is confirmed before anything else: the test
// polls stats on a spare connection of each server, in step on both,
// until each counts it (bwAwaitReserve). The syncs go to the other
// connections and cannot tell; jobgate's goroutine path, with a
// goroutine per connection, sometimes served them first under load, and
// the next step then found the connection not yet waiting.
//
// A close is seen by the server at a time of its own: the test then polls
// stats on a spare connection of each server, in step on both (so that
// cmd-stats stays equal), until both count one connection less. Quit and
// a half-close are answered by the server closing, read to the end: both
// servers close the socket in the same turn as they return its jobs.
//
// Seeds alternate between jobgate's event loop and its goroutine path. On
// the latter a waiting connection's reply is written by the connection's
// own goroutine, in no set order with the syncs: it is in time in
// practice (the syncs take several round trips), and the deadline above
// covers it when it is not. Not through the gateway: in
// front of beanstalkd it serves a waiting reserve by rounds of
// reserve-with-timeout, so which waiting client gets a job is its own
// choice; in front of the local engine a waiting reserve's answer goes
// out on a goroutine of its own (bgwLocal.notify), after the syncs, and
// its stats count connections differently (tried: replies came late and
// current-connections never dropped to the count expected after a close).
//
// What it found in the engine, now fixed (tests in
// jobserver/beanstalk/waiters_test.go): the waiting connection a job goes
// to is beanstalkd's pick from its waiting set (a cursor over an array
// with swap-removal, moved by every reserve, even one answered at once),
// not the longest waiter; a closing connection's jobs go back in the order
// it reserved them, not by TTR. Skipped: a beanstalkd 1.12 bug in its
// timeout heap (a reserve-with-timeout 0 left unanswered, see bwRun).
//
// Left out, as depending on time: DEADLINE_SOON and TTRs running out
// (TTRs are 100 s and more), delays and pauses running out (delays are 0,
// pauses end by pause-tube with 0).
func TestBeanstalkDifferentialWait(t *testing.T) {
	t.Parallel()
	for seed := range uint64(*bwSeeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			subject := bsStartJobgate
			if seed%2 == 1 {
				subject = bsStartJobgateGoroutines
			}
			bwRun(t, seed, *bwSteps, subject(t, 1000).addr, bsStartReal(t, 1000).addr)
		})
	}
}

// Flags to search further than the default run, and to see each step:
//
//	go test -race -run TestBeanstalkDifferentialWait ./proxy -beanstalk-diff-seeds=200 -beanstalk-diff-steps=2000
//	go test -run 'TestBeanstalkDifferentialWait/^7$' ./proxy -v -beanstalk-diff-trace
var (
	bwSeeds = flag.Int("beanstalk-diff-seeds", 12, "seeds of TestBeanstalkDifferentialWait")
	bwSteps = flag.Int("beanstalk-diff-steps", 400, "steps per seed of TestBeanstalkDifferentialWait")
	bwTrace = flag.Bool("beanstalk-diff-trace", false, "log every step of TestBeanstalkDifferentialWait")
)

// bwServer is one side: its connections and a spare one for polling.
type bwServer struct {
	name  string
	addr  string
	conns []*bsConn
	spare *bsConn
}

const bwTimeout = 5 * time.Second

// bwRun runs steps random steps of seed against subject (jobgate) and ref
// (beanstalkd), and fails at the first step where a connection's masked
// output differs, with the steps that led there.
func bwRun(t *testing.T, seed uint64, steps int, subject, ref string) {
	servers := []*bwServer{{name: "jobgate", addr: subject}, {name: "beanstalkd", addr: ref}}
	for _, s := range servers {
		for range bwConns {
			s.conns = append(s.conns, bsDial(t, s.addr))
		}
		s.spare = bsDial(t, s.addr)
		// A round trip on each: the server has then taken the connection
		// in, and counts it in the stats.
		for _, c := range append(slices.Clone(s.conns), s.spare) {
			if err := bwSyncOne(c); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			for _, c := range s.conns {
				c.nc.Close()
			}
			s.spare.nc.Close()
		}
	})
	g := &bwGen{rng: rand.New(rand.NewPCG(seed, 11300))}
	var history []string
	fail := func(step int, format string, a ...any) {
		t.Helper()
		if len(history) > 30 {
			history = history[len(history)-30:]
		}
		t.Fatalf("seed %d step %d, last steps:\n%s\n%s", seed, step, strings.Join(history, "\n"), fmt.Sprintf(format, a...))
	}
	for step := range steps {
		st := g.next()
		history = append(history, st.String())
		outs := make([][][]string, len(servers)) // server, conn, replies
		var reservesBefore []int
		if st.wait {
			var err error
			if reservesBefore, err = bwReserveCounts(servers); err != nil {
				fail(step, "%v", err)
			}
		}
		for i, s := range servers {
			o, err := s.start(st)
			if err != nil {
				fail(step, "%s: %v", s.name, err)
			}
			outs[i] = o
		}
		if st.wait {
			if err := bwAwaitReserve(servers, reservesBefore); err != nil {
				fail(step, "%v", err)
			}
		}
		if st.close {
			if err := bwAwaitClose(servers); err != nil {
				fail(step, "%v", err)
			}
		}
		for i, s := range servers {
			if st.close || st.quit || st.shut {
				s.conns[st.conn] = bsDial(t, s.addr)
			}
			if err := s.sync(st, g, outs[i]); err != nil {
				var ne net.Error
				if s.name == "beanstalkd" && st.cmd == "reserve-with-timeout 0\r\n" &&
					errors.As(err, &ne) && ne.Timeout() && slices.Equal(outs[0][st.conn], []string{"TIMED_OUT\r\n"}) {
					// beanstalkd 1.12 bug: heapremove (heap.c) of the
					// last element sifts the slot past the end toward the
					// root; when its key equals its parent's (connection
					// timeouts are in microseconds, and jobs handed out
					// in one pass get equal TTR deadlines) it swaps the
					// removed connection back in and drops the parent.
					// The broken heap then leaves a due timeout unserved:
					// a reserve-with-timeout 0 waits (here for ever).
					// jobgate answered TIMED_OUT, as it must.
					t.Skipf("seed %d step %d: beanstalkd left reserve-with-timeout 0 unanswered (its timeout heap bug); jobgate answered TIMED_OUT", seed, step)
				}
				fail(step, "%s: %v", s.name, err)
			}
		}
		late, err := bwCollectWaiting(servers, st, g, outs)
		if err != nil {
			fail(step, "%v", err)
		}
		if late != "" {
			// Not a failure if the outputs match: the sync did not
			// hold (see above); otherwise the comparison below fails.
			t.Logf("step %d: %s", step, late)
		}
		if *bwTrace {
			t.Logf("%d %s -> %q", step, st, outs[0])
		}
		for c := range bwConns {
			if !slices.Equal(outs[0][c], outs[1][c]) {
				fail(step, "conn %d output differs:\njobgate:    %q\nbeanstalkd: %q\n(every connection, jobgate: %q\nbeanstalkd: %q)",
					c, outs[0][c], outs[1][c], outs[0], outs[1])
			}
		}
		g.saw(st, outs[0])
	}
}

// start sends the step; for quit it reads the connection to its end.
func (s *bwServer) start(st bwStep) ([][]string, error) {
	outs := make([][]string, bwConns)
	c := s.conns[st.conn]
	if st.close {
		return outs, c.nc.Close()
	}
	if st.shut {
		// beanstalkd answers a waiting reserve TIMED_OUT on a hang-up,
		// then closes.
		if err := c.nc.(*net.TCPConn).CloseWrite(); err != nil {
			return nil, err
		}
		return outs, s.readToEnd(st.conn, outs)
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(bwTimeout))
	if _, err := io.WriteString(c.nc, st.cmd); err != nil {
		return nil, fmt.Errorf("conn %d: send %q: %w", st.conn, st.cmd, err)
	}
	if !st.quit {
		return outs, nil
	}
	return outs, s.readToEnd(st.conn, outs)
}

// readToEnd reads connection i, which the server is closing, to its end
// and closes it. The server has then handled the close (both close the
// socket after returning the connection's jobs, in the same turn).
func (s *bwServer) readToEnd(i int, outs [][]string) error {
	c := s.conns[i]
	defer c.nc.Close()
	for {
		r, err := bwReadReply(c)
		if r == "" && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("conn %d, waiting for its end after %q: %w", i, outs[i], err)
		}
		outs[i] = append(outs[i], bsMask(r))
	}
}

// sync runs the two rounds of list-tube-used on the connections that do
// not wait, the stepping one first, adding what comes before each USING
// to outs.
func (s *bwServer) sync(st bwStep, g *bwGen, outs [][]string) error {
	order := []int{st.conn}
	for i := range bwConns {
		if i != st.conn {
			order = append(order, i)
		}
	}
	fresh := st.close || st.quit || st.shut // st.conn is a new connection, not waiting
	for round := range 2 {
		for _, i := range order {
			if (g.waiting[i] && !(fresh && i == st.conn)) || (st.wait && i == st.conn) {
				continue
			}
			c := s.conns[i]
			_ = c.nc.SetWriteDeadline(time.Now().Add(bwTimeout))
			if _, err := io.WriteString(c.nc, "list-tube-used\r\n"); err != nil {
				return fmt.Errorf("conn %d: sync: %w", i, err)
			}
			if round == 0 && i == st.conn && !fresh {
				// The step's reply, whatever it is (use too answers USING):
				// every command the generator sends gets exactly one.
				r, err := bwReadReply(c)
				if err != nil {
					return fmt.Errorf("conn %d: waiting for the reply of %q: %w", i, st.cmd, err)
				}
				outs[i] = append(outs[i], bsMask(r))
			}
			for {
				r, err := bwReadReply(c)
				if err != nil {
					return fmt.Errorf("conn %d: waiting for USING after %q: %w", i, outs[i], err)
				}
				if strings.HasPrefix(r, "USING ") {
					break
				}
				outs[i] = append(outs[i], bsMask(r))
			}
		}
	}
	return nil
}

// bwCollectWaiting reads the replies that reached the waiting connections
// (the stepping one too, for a reserve) of both servers. A reply one
// server has sent and the other not yet is waited for, with a deadline;
// late then says which.
func bwCollectWaiting(servers []*bwServer, st bwStep, g *bwGen, outs [][][]string) (late string, err error) {
	for i := range bwConns {
		if !g.waiting[i] && !(st.wait && i == st.conn) {
			continue
		}
		if (st.close || st.quit || st.shut) && i == st.conn {
			continue // a new connection
		}
		var ready []bool
		for _, s := range servers {
			ok, err := bwReadable(s.conns[i])
			if err != nil {
				return "", fmt.Errorf("%s conn %d: %w", s.name, i, err)
			}
			ready = append(ready, ok)
		}
		if ready[0] != ready[1] {
			for k, s := range servers {
				if !ready[k] {
					ready[k] = bwAwait(s.conns[i], time.Second)
					late += fmt.Sprintf("%s conn %d: reply late (%v)", s.name, i, ready[k])
				}
			}
		}
		for k, s := range servers {
			if !ready[k] {
				continue
			}
			r, err := bwReadReply(s.conns[i])
			if err != nil {
				return "", fmt.Errorf("%s conn %d: reading the reply of its reserve: %w", s.name, i, err)
			}
			outs[k][i] = append(outs[k][i], bsMask(r))
		}
	}
	return late, nil
}

// bwSyncOne sends list-tube-used on c and reads its reply.
func bwSyncOne(c *bsConn) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(bwTimeout))
	if _, err := io.WriteString(c.nc, "list-tube-used\r\n"); err != nil {
		return err
	}
	r, err := bwReadReply(c)
	if err == nil && !strings.HasPrefix(r, "USING ") {
		err = fmt.Errorf("list-tube-used answered %q", r)
	}
	return err
}

// bwReadable reports, without blocking, whether c has bytes to read (or
// its end).
func bwReadable(c *bsConn) (bool, error) {
	if c.br.Buffered() > 0 {
		return true, nil
	}
	rc, err := c.nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		return false, err
	}
	var n int
	var rerr error
	var b [1]byte
	if err := rc.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return false, err
	}
	if errors.Is(rerr, syscall.EAGAIN) {
		return false, nil
	}
	return n > 0 || rerr == nil, nil // 0 bytes without error: the end
}

// bwAwait waits up to d for c to have bytes to read.
func bwAwait(c *bsConn, d time.Duration) bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	if _, err := c.br.Peek(1); err == nil {
		return true
	}
	c.br = bufio.NewReader(c.nc) // a timed-out bufio.Reader keeps the error
	return false
}

var bwCurConns = regexp.MustCompile(`\ncurrent-connections: (\d+)\n`)

// bwAwaitClose polls stats on the spare connections until both servers
// count bwConns connections (the closed one gone, the spare one in):
// the close has then been handled. Both get the same number of stats.
func bwAwaitClose(servers []*bwServer) error {
	deadline := time.Now().Add(bwTimeout)
	for {
		done := true
		for _, s := range servers {
			c := s.spare
			_ = c.nc.SetWriteDeadline(time.Now().Add(bwTimeout))
			if _, err := io.WriteString(c.nc, "stats\r\n"); err != nil {
				return fmt.Errorf("%s: stats: %w", s.name, err)
			}
			r, err := bwReadReply(c)
			if err != nil {
				return fmt.Errorf("%s: stats: %w", s.name, err)
			}
			m := bwCurConns.FindStringSubmatch(r)
			if m == nil {
				return fmt.Errorf("%s: no current-connections in %q", s.name, r)
			}
			if n, _ := strconv.Atoi(m[1]); n != bwConns {
				done = false
			}
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("a closed connection is still counted")
		}
		time.Sleep(time.Millisecond) // a poll: the servers see the close when they see it
	}
}

var bwCmdReserves = regexp.MustCompile(`(?m)^cmd-reserve(?:-with-timeout)?: (\d+)$`)

// bwReserveCounts asks each server's spare connection for stats and
// returns its reserve commands so far (with and without a timeout).
func bwReserveCounts(servers []*bwServer) ([]int, error) {
	var counts []int
	for _, s := range servers {
		c := s.spare
		_ = c.nc.SetWriteDeadline(time.Now().Add(bwTimeout))
		if _, err := io.WriteString(c.nc, "stats\r\n"); err != nil {
			return nil, fmt.Errorf("%s: stats: %w", s.name, err)
		}
		r, err := bwReadReply(c)
		if err != nil {
			return nil, fmt.Errorf("%s: stats: %w", s.name, err)
		}
		n := 0
		for _, m := range bwCmdReserves.FindAllStringSubmatch(r, -1) {
			v, _ := strconv.Atoi(m[1])
			n += v
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// bwAwaitReserve polls stats on the spare connections, in step on both
// servers, until each has counted the reserve a waiting step sent. The
// syncs cannot tell: they go to the other connections, which a server
// may serve first (jobgate's goroutine path, with its goroutine per
// connection, does under load), and a later step would then find the
// connection not yet waiting.
func bwAwaitReserve(servers []*bwServer, before []int) error {
	deadline := time.Now().Add(bwTimeout)
	for {
		counts, err := bwReserveCounts(servers)
		if err != nil {
			return err
		}
		done := true
		for k := range servers {
			if counts[k] < before[k]+1 {
				done = false
			}
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a reserve is still not counted: %v after %v", counts, before)
		}
		time.Sleep(time.Millisecond) // a poll: the reserve is read when its goroutine runs
	}
}

// bwReadReply reads one whole reply (line, and body for OK, RESERVED and
// FOUND) within bwTimeout.
func bwReadReply(c *bsConn) (string, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(bwTimeout))
	line, err := c.br.ReadString('\n')
	if err != nil {
		return line, err
	}
	f := strings.Fields(line)
	if len(f) >= 2 && (f[0] == "OK" || f[0] == "RESERVED" || f[0] == "FOUND") {
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			return line, nil
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(c.br, body); err != nil {
			return line, err
		}
		return line + string(body), nil
	}
	return line, nil
}
