package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildJobgate builds the command once per test run.
func buildJobgate(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := osMkdirTemp()
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "jobgate")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// jobgateProc is a running jobgate binary.
type jobgateProc struct {
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited
	err   error         // its exit status; set before done is closed
	addrs map[string]string
}

// startJobgate runs the binary with args and waits until the named
// services have logged their addresses. It is killed when the test ends.
func startJobgate(t *testing.T, services int, args ...string) *jobgateProc {
	t.Helper()
	p := &jobgateProc{cmd: exec.Command(buildJobgate(t), args...), done: make(chan struct{}), addrs: map[string]string{}}
	p.cmd.SysProcAttr = testutil.ChildAttr()
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	listening := regexp.MustCompile(`msg=listening service=(\w+) addr=(\S+)`)
	lines := bufio.NewScanner(stderr)
	guard := time.AfterFunc(30*time.Second, func() { _ = p.cmd.Process.Kill() })
	for len(p.addrs) < services && lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			p.addrs[m[1]] = m[2]
		}
	}
	guard.Stop()
	if len(p.addrs) < services {
		t.Fatalf("saw listeners %v before the log ended", p.addrs)
	}
	go io.Copy(io.Discard, stderr)
	return p
}

// kill sends SIGKILL and waits for the process; safe to call twice.
func (p *jobgateProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// TestGearmanBackgroundJobsSurviveKill starts the real binary with the
// every-write fsync policy, submits background jobs from several clients,
// kills it with SIGKILL at a random moment, and restarts it on the same
// data directory, several times. Then a worker drains the server: every job
// that got JOB_CREATED must come back exactly once, with its data.
func TestGearmanBackgroundJobsSurviveKill(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-gearman", "127.0.0.1:0", "-beanstalk", "", "-admin", "", "-data", dir, "-data-fsync", "always"}
	var mu sync.Mutex
	acked := map[string]string{} // handle -> data
	for round := range 3 {
		p := startJobgate(t, 1, args...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for client := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				submitUntilStopped(p.addrs["gearman"], fmt.Sprintf("r%d-c%d", round, client), stop, func(handle, data string) {
					mu.Lock()
					defer mu.Unlock()
					if prev, dup := acked[handle]; dup {
						t.Errorf("handle %s acknowledged twice (%q, then %q)", handle, prev, data)
					}
					acked[handle] = data
				})
			}()
		}
		// The moment of the kill is random; what must hold does not
		// depend on it.
		time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
		p.kill()
		close(stop)
		wg.Wait()
	}
	if len(acked) == 0 {
		t.Fatal("no job was acknowledged before the kills")
	}

	p := startJobgate(t, 1, args...)
	got := drain(t, p.addrs["gearman"])
	for handle, data := range acked {
		if got[handle] != data {
			t.Errorf("acknowledged job %s (%q) came back as %q", handle, data, got[handle])
		}
	}
	t.Logf("%d jobs acknowledged over 3 kills, %d restored", len(acked), len(got))
}

// submitUntilStopped submits background jobs over one connection until
// stop is closed or the server goes away, calling acked for each
// JOB_CREATED.
func submitUntilStopped(addr, prefix string, stop <-chan struct{}, acked func(handle, data string)) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer nc.Close()
	r := codec.NewReader(nc, codec.Limits{})
	w := codec.NewWriter(nc)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		data := fmt.Sprintf("%s-%d", prefix, i)
		if w.WritePacket(codec.Req, codec.SubmitJobBg, []byte("crash"), nil, []byte(data)) != nil || w.Flush() != nil {
			return
		}
		f, err := r.ReadFrame()
		if err != nil || f.Packet.Type != codec.JobCreated {
			return
		}
		acked(string(f.Packet.Handle()), data)
	}
}

// drain grabs and completes every queued "crash" job, returning handle ->
// data, and fails on a job handed out twice.
func drain(t *testing.T, addr string) map[string]string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	r := codec.NewReader(nc, codec.Limits{})
	w := codec.NewWriter(nc)
	w.WritePacket(codec.Req, codec.CanDo, []byte("crash"))
	got := map[string]string{}
	for {
		w.WritePacket(codec.Req, codec.GrabJob)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f.Packet.Type {
		case codec.NoJob:
			return got
		case codec.JobAssign:
			h := string(f.Packet.Handle())
			if _, dup := got[h]; dup {
				t.Errorf("job %s handed out twice", h)
			}
			got[h] = string(f.Packet.Data())
			w.WritePacket(codec.Req, codec.WorkComplete, []byte(h), nil)
		default:
			t.Fatalf("unexpected %v", f.Packet.Type)
		}
	}
}

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "jobgate-test-bin") }

// TestMain removes the binary buildJobgate made.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// TestGearmanUpstreamFlag runs the one-line gateway in front of a real
// gearmand: a background job submitted to jobgate lands on the upstream,
// and its handle names the upstream backend.
func TestGearmanUpstreamFlag(t *testing.T) {
	up := testutil.StartGearmand(t)
	p := startJobgate(t, 1, "-gearman", "127.0.0.1:0", "-beanstalk", "", "-admin", "", "-data", "", "-gearman-upstream", up)
	nc, err := net.Dial("tcp", p.addrs["gearman"])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	r, w := codec.NewReader(nc, codec.Limits{}), codec.NewWriter(nc)
	w.WritePacket(codec.Req, codec.SubmitJobBg, []byte("via-gateway"), nil, []byte("x"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f, err := r.ReadFrame()
	if err != nil || f.Packet.Type != codec.JobCreated {
		t.Fatalf("submit: %v %v", f.Packet.Type, err)
	}
	if h := string(f.Packet.Handle()); !strings.HasPrefix(h, "@1:") {
		t.Errorf("handle %q does not name backend 1", h)
	}
	status, err := upstreamStatus(up)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "via-gateway\t1\t0\t0\n") {
		t.Errorf("upstream status lacks the job:\n%s", status)
	}
}

// upstreamStatus asks a gearmand for its admin status listing.
func upstreamStatus(addr string) (string, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte("status\n")); err != nil {
		return "", err
	}
	var b strings.Builder
	lines := bufio.NewScanner(nc)
	for lines.Scan() && lines.Text() != "." {
		b.WriteString(lines.Text() + "\n")
	}
	return b.String(), lines.Err()
}

// TestBeanstalkJobsSurviveKill is the Beanstalk counterpart: producers put
// and consumers reserve and delete under the every-write policy while the
// binary is killed with SIGKILL at random moments. After the last restart
// every acknowledged put is there with its body, unless its delete was
// acknowledged (then it is gone) or sent without an answer before the kill
// (then either is right).
func TestBeanstalkJobsSurviveKill(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-gearman", "", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", dir, "-data-fsync", "always"}
	var mu sync.Mutex
	put := map[string]string{}     // id -> body
	deleted := map[string]bool{}   // delete acknowledged
	attempted := map[string]bool{} // delete sent
	for round := range 3 {
		p := startJobgate(t, 1, args...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for client := range 3 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				beanstalkPutUntilStopped(p.addrs["beanstalk"], fmt.Sprintf("r%d-c%d", round, client), stop, func(id, body string) {
					mu.Lock()
					defer mu.Unlock()
					if _, dup := put[id]; dup {
						t.Errorf("id %s acknowledged twice", id)
					}
					put[id] = body
				})
			}()
			go func() {
				defer wg.Done()
				beanstalkDeleteUntilStopped(p.addrs["beanstalk"], stop, func(id string) {
					mu.Lock()
					defer mu.Unlock()
					attempted[id] = true
				}, func(id string) {
					mu.Lock()
					defer mu.Unlock()
					deleted[id] = true
				})
			}()
		}
		time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond) // a random moment to kill at
		p.kill()
		close(stop)
		wg.Wait()
	}
	if len(put) == 0 || len(deleted) == 0 {
		t.Fatalf("%d puts and %d deletes acknowledged: nothing to check", len(put), len(deleted))
	}
	p := startJobgate(t, 1, args...)
	nc, err := net.Dial("tcp", p.addrs["beanstalk"])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(nc)
	for id, body := range put {
		fmt.Fprintf(nc, "peek %s\r\n", id)
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if strings.HasPrefix(line, "FOUND") {
			if got, err = r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		switch want := fmt.Sprintf("FOUND %s %d\r\n", id, len(body)); {
		case deleted[id]:
			if line != "NOT_FOUND\r\n" {
				t.Errorf("job %s was deleted but peek answers %q", id, line)
			}
		case attempted[id] && line == "NOT_FOUND\r\n":
			// deleted, but the kill came before the answer
		case line != want || got != body+"\r\n":
			t.Errorf("job %s: peek answered %q %q, want %q %q", id, line, got, want, body+"\r\n")
		}
	}
	t.Logf("%d puts and %d deletes acknowledged over 3 kills", len(put), len(deleted))
}

// beanstalkPutUntilStopped puts jobs until stop is closed or the server
// goes away, calling acked for each INSERTED.
func beanstalkPutUntilStopped(addr, prefix string, stop <-chan struct{}, acked func(id, body string)) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		body := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := fmt.Fprintf(nc, "put 0 0 60 %d\r\n%s\r\n", len(body), body); err != nil {
			return
		}
		line, err := r.ReadString('\n')
		id, ok := strings.CutPrefix(strings.TrimSpace(line), "INSERTED ")
		if err != nil || !ok {
			return
		}
		acked(id, body)
	}
}

// beanstalkDeleteUntilStopped reserves and deletes jobs until stop is
// closed or the server goes away, calling sent before each delete and
// acked for each DELETED.
func beanstalkDeleteUntilStopped(addr string, stop <-chan struct{}, sent, acked func(id string)) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	for {
		select {
		case <-stop:
			return
		default:
		}
		if _, err := nc.Write([]byte("reserve-with-timeout 0\r\n")); err != nil {
			return
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "RESERVED" {
			continue // TIMED_OUT: nothing ready yet
		}
		if _, err := r.ReadString('\n'); err != nil { // the body
			return
		}
		sent(f[1])
		if _, err := fmt.Fprintf(nc, "delete %s\r\n", f[1]); err != nil {
			return
		}
		if line, err := r.ReadString('\n'); err != nil || line != "DELETED\r\n" {
			return
		}
		acked(f[1])
	}
}
