package proxy

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// crashDirEnv makes TestHelperGearmanServer a server on that data
// directory, for TestGearmanJournalSurvivesKill.
const crashDirEnv = "JOBGATE_TEST_GEARMAN_DATA"

// TestHelperGearmanServer is not a test: run by TestGearmanJournalSurvivesKill
// in a child process, it serves Gearman with the Always policy on the data
// directory named by crashDirEnv, prints its address, and runs until killed.
func TestHelperGearmanServer(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestGearmanJournalSurvivesKill")
	}
	cfg := gearmanConfigForTest()
	cfg.Journal = openTestJournal(t, dir, journal.Always)
	srv, err := NewGearmanServer(GearmanConfig{Engine: cfg})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("ADDR", l.Addr())
	srv.Serve(l)
	select {}
}

// crashBook is what the clients and the worker know: acknowledged jobs,
// and completions proven durable (the worker got its next reply).
type crashBook struct {
	mu        sync.Mutex
	acked     map[string]string // handle -> data: JOB_CREATED received
	sent      map[string]bool   // data of every submit sent
	done      map[string]bool   // handles whose completion is durable
	maybeDone map[string]bool   // handles completed without proof
	maxHandle int
}

func handleNum(h string) int {
	n, _ := strconv.Atoi(h[strings.LastIndexByte(h, ':')+1:])
	return n
}

// TestGearmanJournalSurvivesKill submits background jobs from several
// concurrent clients while a worker completes some, kills the server with
// SIGKILL at a random moment, restarts it on the same data directory, and
// checks that every acknowledged job is there exactly once, with its data,
// and that no job whose completion was durable came back.
func TestGearmanJournalSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	dir := t.TempDir()
	book := &crashBook{acked: map[string]string{}, sent: map[string]bool{}, done: map[string]bool{}, maybeDone: map[string]bool{}}
	const rounds = 4
	for r := 0; r < rounds; r++ {
		child := testutil.StartChild(t, "TestHelperGearmanServer", crashDirEnv, dir)
		if r > 0 {
			drainAndCheck(t, child.Addr, book)
		}
		var wg sync.WaitGroup
		for k := 0; k < 4; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				crashClient(child.Addr, fmt.Sprintf("r%d-c%d", r, k), book)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			crashWorker(child.Addr, book)
		}()
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		child.Kill()
		wg.Wait()
		book.mu.Lock()
		t.Logf("round %d: %d acknowledged jobs live, %d completions durable", r, len(book.acked), len(book.done))
		book.mu.Unlock()
	}
	drainAndCheck(t, testutil.StartChild(t, "TestHelperGearmanServer", crashDirEnv, dir).Addr, book)
}

// crashClient submits until the connection dies.
func crashClient(addr, name string, book *crashBook) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	for i := 0; ; i++ {
		data := fmt.Sprintf("%s-%d", name, i)
		book.mu.Lock()
		book.sent[data] = true
		book.mu.Unlock()
		if _, err := nc.Write(codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte("crash"), nil, []byte(data))); err != nil {
			return
		}
		p, err := readPacket(br)
		if err != nil {
			return
		}
		if p.Type != codec.JobCreated {
			panic("submit: " + describe(p))
		}
		h := string(p.Arg(0))
		book.mu.Lock()
		// The worker may have run the job before this goroutine got here.
		if !book.done[h] && !book.maybeDone[h] {
			book.acked[h] = data
		}
		book.maxHandle = max(book.maxHandle, handleNum(h))
		book.mu.Unlock()
	}
}

// crashWorker completes jobs until the connection dies. A completion is
// durable once the worker's next request is answered.
func crashWorker(addr string, book *crashBook) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	nc.Write(codec.AppendPacket(nil, codec.Req, codec.CanDo, []byte("crash")))
	var last string
	for {
		if _, err := nc.Write(codec.AppendPacket(nil, codec.Req, codec.GrabJob)); err != nil {
			return
		}
		p, err := readPacket(br)
		if err != nil {
			return
		}
		book.mu.Lock()
		if last != "" {
			book.done[last] = true
			delete(book.maybeDone, last)
			delete(book.acked, last)
			last = ""
		}
		book.mu.Unlock()
		if p.Type == codec.NoJob {
			time.Sleep(time.Millisecond)
			continue
		}
		last = string(p.Arg(0))
		book.mu.Lock()
		book.maybeDone[last] = true
		book.mu.Unlock()
		nc.Write(codec.AppendPacket(nil, codec.Req, codec.WorkComplete, p.Arg(0), nil))
	}
}

// drainAndCheck grabs every job of a freshly restarted server, checks it
// against the book, then completes them all (durably).
func drainAndCheck(t *testing.T, addr string, book *crashBook) {
	t.Helper()
	nc, br := dialGearman(t, addr)
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	nc.Write(codec.AppendPacket(nil, codec.Req, codec.CanDo, []byte("crash")))
	got := map[string]string{}
	seen := map[string]bool{}
	for {
		nc.Write(codec.AppendPacket(nil, codec.Req, codec.GrabJob))
		p, err := readPacket(br)
		if err != nil {
			t.Fatal(err)
		}
		if p.Type == codec.NoJob {
			break
		}
		h, data := string(p.Arg(0)), string(p.Arg(2))
		if seen[data] {
			t.Fatalf("job %q restored twice", data)
		}
		seen[data] = true
		got[h] = data
	}
	book.mu.Lock()
	defer book.mu.Unlock()
	for h, data := range book.acked {
		if got[h] != data && !book.maybeDone[h] { // completed, maybe durably
			t.Errorf("acknowledged job %s (%s) lost after kill: got %q", h, data, got[h])
		}
	}
	for h, data := range got {
		switch {
		case book.done[h]:
			t.Errorf("job %s (%s) completed durably, but came back", h, data)
		case book.acked[h] == data, book.maybeDone[h]:
		case !book.sent[data]:
			t.Errorf("job %s (%q) was never submitted", h, data)
		}
	}
	// Complete everything, durably (the ECHO_RES proves it), and start
	// the next round from an empty queue.
	var req []byte
	for h := range got {
		req = codec.AppendPacket(req, codec.Req, codec.WorkComplete, []byte(h), nil)
	}
	req = codec.AppendPacket(req, codec.Req, codec.EchoReq, []byte("sync"))
	nc.Write(req)
	if p, err := readPacket(br); err != nil || p.Type != codec.EchoRes {
		t.Fatalf("echo: %v %v", p, err)
	}
	// Handles continue after every handle used before the kill.
	nc.Write(codec.AppendPacket(nil, codec.Req, codec.SubmitJobBg, []byte("probe"), nil, nil))
	p, err := readPacket(br)
	if err != nil || p.Type != codec.JobCreated {
		t.Fatalf("probe: %v %v", p, err)
	}
	if n := handleNum(string(p.Arg(0))); n <= book.maxHandle {
		t.Errorf("handle %d reused after restart (highest acknowledged %d)", n, book.maxHandle)
	}
	for h := range got {
		book.done[h] = true
		delete(book.maybeDone, h)
	}
	clear(book.acked)
	nc.Close()
}
