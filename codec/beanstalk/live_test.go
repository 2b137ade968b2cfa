package beanstalk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run the tables against a real beanstalkd, to prove they
// describe real behaviour. Without the binary they fail when CI is set and
// are skipped otherwise.

const beanstalkdBin = "/usr/bin/beanstalkd"

// startBeanstalkd runs beanstalkd on a free loopback port and returns its
// address; the test's cleanup kills it by PID.
func startBeanstalkd(t *testing.T, args ...string) string {
	t.Helper()
	bin := beanstalkdBin
	if _, err := os.Stat(bin); err != nil {
		if p, lerr := exec.LookPath("beanstalkd"); lerr == nil {
			bin = p
		} else if os.Getenv("CI") != "" {
			t.Fatalf("beanstalkd not installed: %v", err)
		} else {
			t.Skipf("beanstalkd not installed: %v", err)
		}
	}
	for range 3 {
		if addr, ok := tryBeanstalkd(t, bin, args); ok {
			return addr
		}
	}
	t.Fatal("beanstalkd did not start")
	return ""
}

// tryBeanstalkd starts beanstalkd on a port that was free a moment ago. It
// reports false if the process exited, as when another took the port.
func tryBeanstalkd(t *testing.T, bin string, args []string) (string, bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"-l", "127.0.0.1", "-p", port}, args...)...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill() // by PID: this process only
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", port)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			t.Logf("beanstalkd exited: %s", stderr.String())
			return "", false
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("beanstalkd did not accept connections: %s", stderr.String())
	return "", false
}

// serverVersion asks the server at addr for its version.
func serverVersion(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "stats\r\n")
	rep, err := NewReplyReader(c, Limits{}).ReadReply()
	if err != nil || rep.Kind != OK {
		t.Fatalf("stats: %v %v", rep, err)
	}
	var st ServerStats
	if err := st.ParseYAML(rep.Body); err != nil {
		t.Fatal(err)
	}
	return st.Version
}

// clientErrorKinds are the replies to a command the server refused.
var clientErrorKinds = map[ReplyKind]bool{
	BadFormat: true, UnknownCommand: true, ExpectedCRLF: true, JobTooBig: true,
	InternalError: true, OutOfMemory: true, Draining: true,
}

// realWords returns the replies the real server must send for the row's
// input and sentinel: the client error's word for each client error, ""
// for a decoded command (any reply but a client error), "EOF" for quit. It
// reports false for rows the real server cannot run: custom line limits,
// truncated input, and commands that would wait.
func (tc *cmdCase) realWords(version string) ([]string, bool) {
	if tc.lim.MaxLine != 0 || tc.eof != nil {
		return nil, false
	}
	if version == "1.12" && tc.real112 != nil {
		return tc.real112, true
	}
	if tc.real != nil {
		return tc.real, true
	}
	var words []string
	for _, r := range tc.wantAll() {
		switch {
		case r.cmd == nil:
			words = append(words, r.err.String())
		case r.cmd.Verb == Reserve || r.cmd.Verb == ReserveWithTimeout && r.cmd.Timeout > 0:
			return nil, false
		case r.cmd.Verb == Quit:
			return append(words, "EOF"), true
		default:
			words = append(words, "")
		}
	}
	return words, true
}

// TestReaderAgainstBeanstalkd sends every row of the command table to a
// real beanstalkd and checks it answers as the codec says: the same client
// error where the codec finds one, a reply that is not a client error
// where the codec decodes a command, and no more. Each row has its own
// connection, using and watching a tube of its own.
func TestReaderAgainstBeanstalkd(t *testing.T) {
	addrs := map[int]string{0: startBeanstalkd(t)}
	version := serverVersion(t, addrs[0])
	t.Logf("beanstalkd %s", version)
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, 32)
		mu    sync.Mutex
		ran   int
	)
	for i, tc := range cmdTable {
		words, ok := tc.realWords(version)
		if !ok {
			continue
		}
		addr, ok := addrs[tc.lim.MaxJobSize]
		if !ok {
			addr = startBeanstalkd(t, "-z", strconv.Itoa(tc.lim.MaxJobSize))
			addrs[tc.lim.MaxJobSize] = addr
		}
		ran++
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := runLive(addr, "t"+strconv.Itoa(i), tc.input(), words); err != nil {
				mu.Lock()
				t.Errorf("%s: %v", short(tc.in), err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of %d rows checked", ran, len(cmdTable))
}

// runLive sends in on a fresh connection whose used and only watched tube
// is tube, and checks the replies against words.
func runLive(addr, tube string, in []byte, words []string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	rr := NewReplyReader(c, Limits{MaxJobSize: 1 << 20})
	read := func(d time.Duration) (*Reply, error) {
		c.SetReadDeadline(time.Now().Add(d))
		return rr.ReadReply()
	}
	fmt.Fprintf(c, "use %s\r\nwatch %s\r\nignore default\r\n", tube, tube)
	for _, want := range []ReplyKind{Using, Watching, Watching} {
		if r, err := read(2 * time.Second); err != nil || r.Kind != want {
			return fmt.Errorf("prelude: got %v %v", r, err)
		}
	}
	if _, err := c.Write(in); err != nil {
		return err
	}
	var got []string
	for _, want := range words {
		r, err := read(2 * time.Second)
		switch {
		case want == "EOF":
			if err != io.EOF {
				return fmt.Errorf("after %q: got %v %v, want EOF", got, r, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("after %q: %v (want %q)", got, err, words)
		case want == "" && !clientErrorKinds[r.Kind], r.Kind.String() == want:
			got = append(got, r.Kind.String())
		default:
			return fmt.Errorf("got %q then %v, want %q", got, r.Kind, words)
		}
	}
	quiet := 150 * time.Millisecond
	if len(words) == 0 {
		quiet = 400 * time.Millisecond // beanstalkd must really be waiting
	}
	if r, err := read(quiet); !isTimeout(err) {
		return fmt.Errorf("got %q then unexpected %v %v", got, r, err)
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestRepliesAgainstBeanstalkd drives a real beanstalkd through a session
// that draws every reply it can send (all but BURIED <id>, DRAINING,
// OUT_OF_MEMORY and INTERNAL_ERROR), decodes each reply with a ReplyReader
// and checks that AppendTo gives back exactly the bytes the server sent.
func TestRepliesAgainstBeanstalkd(t *testing.T) {
	addr := startBeanstalkd(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var raw bytes.Buffer
	rr := NewReplyReader(io.TeeReader(c, &raw), Limits{})
	var enc []byte
	seen := map[ReplyKind]bool{}
	send := func(cmd string, want ReplyKind) *Reply {
		t.Helper()
		io.WriteString(c, cmd)
		r, err := rr.ReadReply()
		if err != nil {
			t.Fatalf("%s: %v", short(cmd), err)
		}
		if r.Kind != want {
			t.Fatalf("%s: got %v, want %v", short(cmd), r.Kind, want)
		}
		enc = r.AppendTo(enc)
		seen[r.Kind] = true
		return r
	}
	send("use lt\r\n", Using)
	send("watch lt\r\n", Watching)
	send("ignore default\r\n", Watching)
	send("ignore lt\r\n", NotIgnored)
	id := send("put 5 0 60 3\r\nabc\r\n", Inserted).ID
	ids := strconv.FormatUint(id, 10)
	send("peek "+ids+"\r\n", Found)
	send("peek-ready\r\n", Found)
	send("reserve\r\n", Reserved)
	send("touch "+ids+"\r\n", Touched)
	send("release "+ids+" 5 0\r\n", Released)
	send("reserve-job "+ids+"\r\n", Reserved)
	send("bury "+ids+" 1\r\n", Buried)
	send("peek-buried\r\n", Found)
	send("kick 10\r\n", KickedCount)
	send("reserve-with-timeout 0\r\n", Reserved)
	send("bury "+ids+" 1\r\n", Buried)
	send("kick-job "+ids+"\r\n", Kicked)
	send("stats-job "+ids+"\r\n", OK)
	send("stats-tube lt\r\n", OK)
	send("stats\r\n", OK)
	send("list-tubes\r\n", OK)
	send("list-tubes-watched\r\n", OK)
	send("list-tube-used\r\n", Using)
	send("delete "+ids+"\r\n", Deleted)
	send("delete "+ids+"\r\n", NotFound)
	send("reserve-with-timeout 0\r\n", TimedOut)
	send("put 0 0 1 0\r\n\r\n", Inserted)
	send("reserve\r\n", Reserved)
	send("reserve\r\n", DeadlineSoon) // ttr 1: always within the safety margin
	send("pause-tube lt 1\r\n", Paused)
	send("put 0 0 1 1\r\nxyz", ExpectedCRLF) // "yz" ends the body
	send("put 0 0 1 65536\r\n"+x(65536)+"\r\n", JobTooBig)
	send("delete x\r\n", BadFormat)
	send("dance\r\n", UnknownCommand)
	if !bytes.Equal(enc, raw.Bytes()) {
		t.Fatalf("re-encoded replies differ from the server's bytes:\n got %q\nwant %q", enc, raw.Bytes())
	}
	for k := Inserted; k <= UnknownCommand; k++ {
		switch k {
		case BuriedID, Draining, OutOfMemory, InternalError:
		default:
			if !seen[k] {
				t.Errorf("session drew no %v", k)
			}
		}
	}
}

// TestStatsAgainstBeanstalkd parses the real stats bodies into the typed
// structs and checks AppendYAML writes the same keys in the same order and
// the same values, quoting aside (1.12 does not quote names).
func TestStatsAgainstBeanstalkd(t *testing.T) {
	addr := startBeanstalkd(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	rr := NewReplyReader(c, Limits{})
	body := func(cmd string) []byte {
		io.WriteString(c, cmd)
		r, err := rr.ReadReply()
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		return bytes.Clone(r.Body)
	}
	body("use st\r\n")
	body("put 1 2 3 1\r\nx\r\n")
	for _, tc := range []struct {
		cmd string
		v   interface {
			ParseYAML([]byte) error
			AppendYAML(*YAMLBuilder)
		}
	}{
		{"stats\r\n", &ServerStats{}},
		{"stats-tube st\r\n", &TubeStats{}},
		{"stats-job 1\r\n", &JobStats{}},
	} {
		real := body(tc.cmd)
		if err := tc.v.ParseYAML(real); err != nil {
			t.Fatalf("%q: %v", tc.cmd, err)
		}
		var b YAMLBuilder
		tc.v.AppendYAML(&b)
		realLines := strings.Split(string(real), "\n")
		ourLines := strings.Split(string(b.Bytes()), "\n")
		if len(realLines) != len(ourLines) {
			t.Fatalf("%q: %d lines, want %d:\n%s", tc.cmd, len(ourLines), len(realLines), b.Bytes())
		}
		for i, want := range realLines {
			got := ourLines[i]
			if k, v, ok := strings.Cut(got, ": \""); ok && !strings.Contains(want, ": \"") {
				got = k + ": " + strings.TrimSuffix(v, "\"") // 1.12 does not quote
			}
			if got != want {
				t.Errorf("%q line %d: got %q, want %q", tc.cmd, i+1, ourLines[i], want)
			}
		}
	}
	var names []string
	if err := ParseList(body("list-tubes\r\n"), func(item []byte) { names = append(names, string(item)) }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "default,st" {
		t.Fatalf("list-tubes: %q", names)
	}
}
