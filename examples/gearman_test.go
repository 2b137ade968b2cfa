package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/examples/gearman/gmexample"
	"github.com/jobgate/jobgate/internal/testutil"
)

// A foreground job through the example client and worker: the client sees
// the handle, both progress reports and the streamed half of the result as
// they come, then the whole result.
func TestGearmanClientAndWorker(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := startGearman(t)

	var workerOut bytes.Buffer
	worker := goRun(func() error {
		return gmexample.RunWorker(ctx, gmexample.WorkerConfig{Addr: addr, Jobs: 2}, &workerOut)
	})
	var clientOut bytes.Buffer
	for _, payload := range []string{"hello world", "x"} {
		if err := gmexample.RunClient(ctx, gmexample.ClientConfig{Addr: addr, Payload: []byte(payload)}, &clientOut); err != nil {
			t.Fatal(err)
		}
	}
	wait(ctx, t, "worker", worker)

	// "x" reversed is "x": its first half is empty, and so is its WORK_DATA.
	wantClient := `created H:test:1
status 1/2
data "dlrow"
status 2/2
result "dlrow olleh"
created H:test:2
status 1/2
data ""
status 2/2
result "x"
`
	if got := clientOut.String(); got != wantClient {
		t.Errorf("client printed:\n%s\nwant:\n%s", got, wantClient)
	}
	wantWorker := `H:test:1 "hello world" -> "dlrow olleh"
H:test:2 "x" -> "x"
`
	if got := workerOut.String(); got != wantWorker {
		t.Errorf("worker printed:\n%s\nwant:\n%s", got, wantWorker)
	}
}

// A background job: queued with no worker, its status is known and not
// running; once a worker has run it, the server forgets it.
func TestGearmanBackgroundStatus(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := startGearman(t)

	var clientOut bytes.Buffer
	bg := gmexample.ClientConfig{Addr: addr, Function: "reverse", Payload: []byte("abc"), Background: true}
	if err := gmexample.RunClient(ctx, bg, &clientOut); err != nil {
		t.Fatal(err)
	}
	if err := gmexample.RunClient(ctx, gmexample.ClientConfig{Addr: addr, StatusOf: "H:test:1"}, &clientOut); err != nil {
		t.Fatal(err)
	}
	want := "created H:test:1\nH:test:1 known=true running=false 0/0\nH:test:1 known=true running=false 0/0\n"
	if got := clientOut.String(); got != want {
		t.Fatalf("client printed:\n%s\nwant:\n%s", got, want)
	}

	var workerOut bytes.Buffer
	if err := gmexample.RunWorker(ctx, gmexample.WorkerConfig{Addr: addr, Jobs: 1}, &workerOut); err != nil {
		t.Fatal(err)
	}
	if got, want := workerOut.String(), "H:test:1 \"abc\" -> \"cba\"\n"; got != want {
		t.Fatalf("worker printed %q, want %q", got, want)
	}
	// RunWorker returns once WORK_COMPLETE is written, which may be before
	// the server has read it: wait for the server to forget the job.
	for {
		st, err := gmexample.GetStatus(ctx, addr, "H:test:1")
		if err != nil {
			t.Fatal(err)
		}
		if !st.Known {
			if st != (gmexample.Status{Handle: "H:test:1"}) {
				t.Fatalf("finished job: %v", st)
			}
			break
		}
		if st.Numerator != 0 && (!st.Running || st.Denominator != 2) {
			t.Fatalf("running job: %v", st)
		}
		time.Sleep(time.Millisecond)
	}
}

// The example worker serves libgearman's command-line client: it prints
// the WORK_DATA chunk and the WORK_COMPLETE rest as the whole result.
func TestGearmanWorkerWithCLIClient(t *testing.T) {
	t.Parallel()
	gearmanBin := testutil.RequireBinary(t, "gearman")
	ctx := testContext(t)
	addr := startGearman(t)
	host, port, _ := net.SplitHostPort(addr)

	var workerOut bytes.Buffer
	worker := goRun(func() error {
		return gmexample.RunWorker(ctx, gmexample.WorkerConfig{Addr: addr, Jobs: 1}, &workerOut)
	})
	// The job waits in the queue if the worker has not said CAN_DO yet, so
	// the order in which the two start does not matter.
	out, err := exec.CommandContext(ctx, gearmanBin, "-h", host, "-p", port, "-f", "reverse", "hello").Output()
	if err != nil {
		t.Fatalf("gearman: %v", err)
	}
	wait(ctx, t, "worker", worker)
	// The gearman tool writes data unbuffered and its status lines through
	// stdio, which flushes them at exit: so, piped, the statuses come last.
	if got, want := string(out), "olleh50% Complete\n100% Complete\n"; got != want {
		t.Errorf("gearman printed %q, want %q", got, want)
	}
	if got, want := workerOut.String(), "H:test:1 \"hello\" -> \"olleh\"\n"; got != want {
		t.Errorf("worker printed %q, want %q", got, want)
	}
}

// The example client works with libgearman's command-line worker, which
// pipes the payload through a command (tr) and answers with WORK_COMPLETE.
func TestGearmanClientWithCLIWorker(t *testing.T) {
	t.Parallel()
	gearmanBin := testutil.RequireBinary(t, "gearman")
	ctx := testContext(t)
	addr := startGearman(t)
	host, port, _ := net.SplitHostPort(addr)

	startProcess(t, gearmanBin, "-h", host, "-p", port, "-w", "-f", "upper", "--", "tr", "a-z", "A-Z")
	var clientOut bytes.Buffer
	result, err := gmexample.Submit(ctx, addr, "upper", []byte("hello"), &clientOut)
	if err != nil {
		t.Fatal(err)
	}
	if string(result) != "HELLO" {
		t.Errorf("result %q, want %q", result, "HELLO")
	}
	if got, want := clientOut.String(), "created H:test:1\nresult \"HELLO\"\n"; got != want {
		t.Errorf("client printed %q, want %q", got, want)
	}
}

// Cancelling the context stops a worker that is asleep waiting for jobs.
func TestGearmanWorkerStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := startGearman(t)
	wctx, cancel := context.WithCancel(ctx)
	worker := goRun(func() error {
		return gmexample.RunWorker(wctx, gmexample.WorkerConfig{Addr: addr, Function: "idle"}, &bytes.Buffer{})
	})
	// Wait until the worker is registered and so about to sleep, so that
	// the cancel interrupts a blocked read rather than the dial.
	for !strings.Contains(adminCommand(ctx, t, addr, "status"), "idle\t0\t0\t1\n") {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-worker:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("worker returned %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("worker did not stop")
	}
}

// adminCommand sends a Gearman text admin command and returns its listing,
// up to and including the "." line that ends it.
func adminCommand(ctx context.Context, t *testing.T, addr, command string) string {
	t.Helper()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	if _, err := nc.Write([]byte(command + "\n")); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r := bufio.NewReader(nc)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		b.WriteString(line)
		if line == ".\n" {
			return b.String()
		}
	}
}
