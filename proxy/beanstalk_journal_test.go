package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/proxy"
)

// bsCrashDirEnv makes TestHelperBeanstalkServer a server on that data
// directory, for TestBeanstalkJournalSurvivesKill.
const bsCrashDirEnv = "JOBGATE_TEST_BEANSTALK_DATA"

// bsStartDurable serves Beanstalk on a journal in dataDir with policy p,
// wired as cmd/jobgate wires it; the server is shut down and the journal
// closed at the end of the test, or by the returned stop.
func bsStartDurable(t testing.TB, dataDir string, p journal.SyncPolicy) (addr string, stop func()) {
	t.Helper()
	fj, _, err := engine.OpenJournal(dataDir, journal.Options{Sync: p, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{EngineConfig: engine.Config{Journal: fj}, Goroutines: bsGoroutines(t)})
	if err != nil {
		fj.Close()
		t.Fatal(err)
	}
	addr, stopServer := testutil.ServeOn(t, srv, testutil.Listen(t))
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopServer()
			if err := fj.Close(); err != nil {
				t.Errorf("journal close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return addr, stop
}

// TestHelperBeanstalkServer is not a test: run by
// TestBeanstalkJournalSurvivesKill in a child process, it serves Beanstalk
// with the Always policy on the data directory named by bsCrashDirEnv,
// prints its address, and runs until killed.
func TestHelperBeanstalkServer(t *testing.T) {
	dir := os.Getenv(bsCrashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestBeanstalkJournalSurvivesKill")
	}
	addr, _ := bsStartDurable(t, dir, journal.Always)
	fmt.Println("ADDR", addr)
	select {}
}

// bsBook is what the producers and consumers know: acknowledged puts and
// acknowledged deletes.
type bsBook struct {
	mu        sync.Mutex
	acked     map[uint64]string // id -> body: INSERTED received
	sent      map[string]bool   // body of every put sent
	deleted   map[uint64]bool   // DELETED received
	maybeDone map[uint64]bool   // delete sent, no answer
	maxID     uint64
}

// bsClient is a line-oriented Beanstalk client for the crash test.
type bsClient struct {
	nc net.Conn
	br *bufio.Reader
}

func (c *bsClient) cmd(line string) (string, error) {
	if _, err := io.WriteString(c.nc, line); err != nil {
		return "", err
	}
	s, err := c.br.ReadString('\n')
	return strings.TrimSuffix(s, "\r\n"), err
}

// reserve runs reserve-with-timeout 0: ok is false for TIMED_OUT.
func (c *bsClient) reserve() (id uint64, body string, ok bool, err error) {
	r, err := c.cmd("reserve-with-timeout 0\r\n")
	if err != nil || r == "TIMED_OUT" {
		return 0, "", false, err
	}
	f := strings.Fields(r)
	if len(f) != 3 || f[0] != "RESERVED" {
		return 0, "", false, fmt.Errorf("reserve: %q", r)
	}
	id, _ = strconv.ParseUint(f[1], 10, 64)
	n, _ := strconv.Atoi(f[2])
	b := make([]byte, n+2)
	if _, err := io.ReadFull(c.br, b); err != nil {
		return 0, "", false, err
	}
	return id, string(b[:n]), true, nil
}

func dialBs(addr string) (*bsClient, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &bsClient{nc: nc, br: bufio.NewReader(nc)}, nil
}

// TestBeanstalkJournalSurvivesKill puts from several concurrent producers
// while consumers reserve and delete, kills the server with SIGKILL at a
// random moment, restarts it on the same data directory, and checks that
// every acknowledged put is there exactly once, with its body, that no
// acknowledged delete came back, and that ids are never reused.
func TestBeanstalkJournalSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	dir := t.TempDir()
	book := &bsBook{acked: map[uint64]string{}, sent: map[string]bool{}, deleted: map[uint64]bool{}, maybeDone: map[uint64]bool{}}
	const rounds = 4
	for r := 0; r < rounds; r++ {
		child := testutil.StartChild(t, "TestHelperBeanstalkServer", bsCrashDirEnv, dir)
		if r > 0 {
			bsDrainAndCheck(t, child.Addr, book)
		}
		var wg sync.WaitGroup
		for k := 0; k < 4; k++ {
			wg.Go(func() { bsCrashProducer(child.Addr, fmt.Sprintf("r%d-p%d", r, k), book) })
		}
		for range 2 {
			wg.Go(func() { bsCrashConsumer(child.Addr, book) })
		}
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		child.Kill()
		wg.Wait()
		book.mu.Lock()
		t.Logf("round %d: %d acknowledged jobs live, %d deletes acknowledged", r, len(book.acked), len(book.deleted))
		book.mu.Unlock()
	}
	bsDrainAndCheck(t, testutil.StartChild(t, "TestHelperBeanstalkServer", bsCrashDirEnv, dir).Addr, book)
}

// bsCrashProducer puts until the connection dies.
func bsCrashProducer(addr, name string, book *bsBook) {
	c, err := dialBs(addr)
	if err != nil {
		return
	}
	defer c.nc.Close()
	for i := 0; ; i++ {
		body := fmt.Sprintf("%s-%d", name, i)
		book.mu.Lock()
		book.sent[body] = true
		book.mu.Unlock()
		r, err := c.cmd(fmt.Sprintf("put 0 0 60 %d\r\n%s\r\n", len(body), body))
		if err != nil {
			return
		}
		id, ok := strings.CutPrefix(r, "INSERTED ")
		if !ok {
			panic("put: " + r)
		}
		n, _ := strconv.ParseUint(id, 10, 64)
		book.mu.Lock()
		// A consumer may have deleted the job before we got here.
		if !book.deleted[n] && !book.maybeDone[n] {
			book.acked[n] = body
		}
		book.maxID = max(book.maxID, n)
		book.mu.Unlock()
	}
}

// bsCrashConsumer reserves and deletes until the connection dies.
func bsCrashConsumer(addr string, book *bsBook) {
	c, err := dialBs(addr)
	if err != nil {
		return
	}
	defer c.nc.Close()
	for {
		id, _, ok, err := c.reserve()
		if err != nil {
			return
		}
		if !ok {
			time.Sleep(time.Millisecond)
			continue
		}
		book.mu.Lock()
		book.maybeDone[id] = true
		book.maxID = max(book.maxID, id)
		book.mu.Unlock()
		r, err := c.cmd(fmt.Sprintf("delete %d\r\n", id))
		if err != nil {
			return
		}
		if r != "DELETED" {
			panic("delete: " + r)
		}
		book.mu.Lock()
		book.deleted[id] = true
		delete(book.maybeDone, id)
		delete(book.acked, id)
		book.mu.Unlock()
	}
}

// bsDrainAndCheck reserves every job of a freshly restarted server, checks
// them against the book, then deletes them all (durably).
func bsDrainAndCheck(t *testing.T, addr string, book *bsBook) {
	t.Helper()
	c, err := dialBs(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.nc.Close()
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	got := map[uint64]string{}
	seen := map[string]bool{}
	for {
		id, body, ok, err := c.reserve()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if seen[body] {
			t.Fatalf("job %q restored twice", body)
		}
		seen[body] = true
		got[id] = body
	}
	book.mu.Lock()
	defer book.mu.Unlock()
	for id, body := range book.acked {
		if got[id] != body && !book.maybeDone[id] { // deleted, maybe durably
			t.Errorf("acknowledged job %d (%s) lost after kill: got %q", id, body, got[id])
		}
	}
	for id, body := range got {
		switch {
		case book.deleted[id]:
			t.Errorf("job %d (%s) deleted durably, but came back", id, body)
		case book.acked[id] == body, book.maybeDone[id]:
		case !book.sent[body]:
			t.Errorf("job %d (%q) was never put", id, body)
		}
	}
	for id := range got {
		if r, err := c.cmd(fmt.Sprintf("delete %d\r\n", id)); err != nil || r != "DELETED" {
			t.Fatalf("delete %d: %q %v", id, r, err)
		}
		book.deleted[id] = true
		delete(book.maybeDone, id)
	}
	// Ids continue after every id used before the kill.
	r, err := c.cmd("put 0 0 1 5\r\nprobe\r\n")
	n, _ := strconv.ParseUint(strings.TrimPrefix(r, "INSERTED "), 10, 64)
	if err != nil || n <= book.maxID {
		t.Errorf("probe put: %q %v (highest id seen %d)", r, err, book.maxID)
	}
	if r, err := c.cmd(fmt.Sprintf("delete %d\r\n", n)); err != nil || r != "DELETED" {
		t.Fatalf("delete probe: %q %v", r, err)
	}
	book.maxID = max(book.maxID, n)
	clear(book.acked)
}

// TestBeanstalkJournalRestart: a clean shutdown and restart keeps ready,
// delayed and buried jobs, in place, and the used tube's peeks see them.
func TestBeanstalkJournalRestart(t *testing.T) { bsBothPaths(t, testBeanstalkJournalRestart) }

func testBeanstalkJournalRestart(t *testing.T) {
	dir := t.TempDir()
	addr, stop := bsStartDurable(t, dir, journal.Interval(0))
	c, err := dialBs(addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ send, want string }{
		{"use jobs\r\n", "USING jobs"},
		{"put 1 0 60 1\r\na\r\n", "INSERTED 1"},
		{"put 2 3600 60 1\r\nb\r\n", "INSERTED 2"},
		{"put 3 0 60 1\r\nc\r\n", "INSERTED 3"},
		{"reserve-job 3\r\n", "RESERVED 3 1"},
		{"bury 3 9\r\n", "BURIED"},
	} {
		if r, err := c.cmd(step.send); err != nil || r != step.want {
			t.Fatalf("%q: %q %v, want %q", step.send, r, err, step.want)
		}
		if strings.HasPrefix(step.want, "RESERVED") {
			c.br.ReadString('\n')
		}
	}
	c.nc.Close()
	stop()

	addr, _ = bsStartDurable(t, dir, journal.Interval(0))
	if c, err = dialBs(addr); err != nil {
		t.Fatal(err)
	}
	defer c.nc.Close()
	for _, step := range []struct{ send, want string }{
		{"use jobs\r\n", "USING jobs"},
		{"peek-ready\r\n", "FOUND 1 1"},
		{"peek-delayed\r\n", "FOUND 2 1"},
		{"peek-buried\r\n", "FOUND 3 1"},
		{"put 0 0 1 1\r\nd\r\n", "INSERTED 4"},
	} {
		r, err := c.cmd(step.send)
		if err != nil || r != step.want {
			t.Fatalf("%q: %q %v, want %q", step.send, r, err, step.want)
		}
		if strings.HasPrefix(r, "FOUND") {
			c.br.ReadString('\n')
		}
	}
}

// TestBeanstalkJournalLargeBodies: large put bodies arriving in pieces,
// which the event loop reads straight into the job's own buffer, are
// journaled whole (fsync per put) and come back whole after a restart.
func TestBeanstalkJournalLargeBodies(t *testing.T) { bsBothPaths(t, testBeanstalkJournalLargeBodies) }

func testBeanstalkJournalLargeBodies(t *testing.T) {
	dir := t.TempDir()
	addr, stop := bsStartDurable(t, dir, journal.Always)
	bodies := map[uint64]string{}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	for i, n := range []int{10000, 20000} {
		body := strings.Repeat(string(rune('p'+i)), n)
		msg := fmt.Sprintf("put 0 0 60 %d\r\n%s\r\n", n, body)
		for len(msg) > 0 { // in pieces, so the body is not all there with its line
			k := min(3001, len(msg))
			if _, err := io.WriteString(nc, msg[:k]); err != nil {
				t.Fatal(err)
			}
			msg = msg[k:]
			time.Sleep(time.Millisecond)
		}
		line, err := br.ReadString('\n')
		var id uint64
		if _, serr := fmt.Sscanf(line, "INSERTED %d\r\n", &id); err != nil || serr != nil {
			t.Fatalf("put %d: %q %v", i, line, err)
		}
		bodies[id] = body
	}
	nc.Close()
	stop()

	addr, _ = bsStartDurable(t, dir, journal.Always)
	c, err := dialBs(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.nc.Close()
	for id, want := range bodies {
		r, err := c.cmd(fmt.Sprintf("peek %d\r\n", id))
		if want2 := fmt.Sprintf("FOUND %d %d", id, len(want)); err != nil || r != want2 {
			t.Fatalf("peek %d after restart: %q %v, want %q", id, r, err, want2)
		}
		got := make([]byte, len(want)+2)
		if _, err := io.ReadFull(c.br, got); err != nil || string(got) != want+"\r\n" {
			t.Fatalf("job %d's body after restart differs (%v)", id, err)
		}
	}
}

// BenchmarkBeanstalkJournalPut measures put throughput through the server
// with each fsync policy (and none), from 8 concurrent connections; the
// Always policy's group commit shares fsyncs between them.
func BenchmarkBeanstalkJournalPut(b *testing.B) {
	for _, p := range []struct {
		name   string
		policy *journal.SyncPolicy
	}{
		{"none", nil},
		{"never", &journal.Never},
		{"interval", &[]journal.SyncPolicy{journal.Interval(0)}[0]},
		{"always", &journal.Always},
	} {
		b.Run(p.name, func(b *testing.B) {
			var addr string
			if p.policy == nil {
				addr = bsStartJobgate(b, 0).addr
			} else {
				addr, _ = bsStartDurable(b, b.TempDir(), *p.policy)
			}
			put := "put 0 0 60 100\r\n" + strings.Repeat("x", 100) + "\r\n"
			b.SetParallelism(4) // 8 connections on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				c, err := dialBs(addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer c.nc.Close()
				for pb.Next() {
					if r, err := c.cmd(put); err != nil || !strings.HasPrefix(r, "INSERTED ") {
						b.Errorf("put: %q %v", r, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
		})
	}
}
