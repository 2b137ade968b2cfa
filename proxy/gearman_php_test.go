package proxy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// Interoperability with PHP's PECL gearman extension (Debian php-gearman),
// the most used PHP Gearman client, built on libgearman. The same script
// runs against jobgate's engine, jobgate as a gateway in front of a real
// gearmand, and the real gearmand itself; all three must print the same
// transcript, which is what gearmand prints.

const phpGearmanScript = "testdata/gearman_php.php"

// phpPrioWant is the "prio" role's transcript: foreground tasks queued low,
// normal, high before any worker exists run high first.
const phpPrioWant = `complete hgih
complete lamron
complete wol
runTasks true GEARMAN_SUCCESS
`

// phpClientWant is the "client" role's transcript.
const phpClientWant = `ping true
doNormal lamron GEARMAN_SUCCESS
doHigh hgih GEARMAN_SUCCESS
doLow wol GEARMAN_SUCCESS
created d1
status d1 1/3
data d1 a
warning d1 careful
status d1 2/3
data d1 b
complete d1 done
runTasks true GEARMAN_SUCCESS
doNormal fail '' GEARMAN_WORK_FAIL
created f1
fail f1
runTasks true GEARMAN_SUCCESS
doNormal exc '' GEARMAN_WORK_EXCEPTION
created e1
exception e1 boom
runTasks true GEARMAN_SUCCESS
exceptions doNormal exc '' GEARMAN_WORK_EXCEPTION
created e2
exception e2 boom
runTasks true GEARMAN_SUCCESS
created e3
exception e3 boom
runTasks true GEARMAN_SUCCESS
complete same run 1
complete same run 1
runTasks true GEARMAN_SUCCESS
same handle true
timeout '' GEARMAN_TIMEOUT
doBackground GEARMAN_SUCCESS
jobStatus [true,true,1,4]
jobStatusByUniqueKey [true,true,1,4]
jobStatusByUniqueKey unknown [false,false,0,0]
addTaskStatus known=true running=true 1/4
runTasks true GEARMAN_SUCCESS
jobStatus done [false,false,0,0]
jobStatus unknown [false,false,0,0]
args ["args","UNIQUE","610062ff",4] GEARMAN_SUCCESS
handle empty
big 1000000 174ac9a4f023a557a68ab0417355970e 300041 GEARMAN_SUCCESS
expected 1000000 174ac9a4f023a557a68ab0417355970e
explicit explicit GEARMAN_SUCCESS
CAN_DO_TIMEOUT '' GEARMAN_TIMEOUT
doBackground handle GEARMAN_SUCCESS
doHighBackground handle GEARMAN_SUCCESS
doLowBackground handle GEARMAN_SUCCESS
`

// phpWorkerWant is what the "worker" role reports on stderr.
const phpWorkerWant = `worker: work GEARMAN_WORK_FAIL
worker: work GEARMAN_WORK_FAIL
worker: work GEARMAN_UNEXPECTED_PACKET
`

// phpWorkerTimeoutWant is the "wtimeout" role's transcript: a worker with
// three functions and a 200 ms timeout, ECHO, CANT_DO and RESET_ABILITIES.
const phpWorkerTimeoutWant = `worker ping true
idle work false GEARMAN_TIMEOUT
unregister true
wt-b ran one
work true GEARMAN_SUCCESS
idle work false GEARMAN_TIMEOUT
wt-c job [true,false,0,0]
unregisterAll true
no functions work false GEARMAN_NO_REGISTERED_FUNCTIONS
`

// uuidRE matches the unique ids libgearman makes up for tasks without one.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// phpLongKeyWant is the "longkey" role's transcript: gearmand closes the
// connection, libgearman says so at once and reconnects. (The extension's
// jobStatusByUniqueKey leaves returnCode at success even then.)
const phpLongKeyWant = `jobStatus 200 [false,false,0,0] GEARMAN_LOST_CONNECTION
then doBackground handle GEARMAN_SUCCESS
jobStatus 64 [false,false,0,0] GEARMAN_LOST_CONNECTION
then doBackground handle GEARMAN_SUCCESS
jobStatusByUniqueKey 64 [false,false,0,0] GEARMAN_SUCCESS
then doBackground handle GEARMAN_SUCCESS
`

// requirePHPGearman returns the php binary when the gearman extension is
// loaded; it skips (fails under CI) otherwise.
func requirePHPGearman(t *testing.T) string {
	t.Helper()
	php := testutil.RequireBinary(t, "php")
	testutil.RequireInstalled(t, "php-gearman", exec.Command(php, "-r", `exit(class_exists("GearmanClient") ? 0 : 1);`).Run())
	return php
}

// phpProc is one running PHP role.
type phpProc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	err  testutil.Buffer // read while the role runs (waitHeard)
	done chan struct{}
}

// startPHP starts a role of the script; it is killed, by PID, when the
// test ends or after limit.
func startPHP(t *testing.T, php string, limit time.Duration, role, addr, dir string) *phpProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	p := &phpProc{done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, php, phpGearmanScript, role, addr, dir)
	p.cmd.SysProcAttr = testutil.ChildAttr()
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); cancel(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

// stop ends the role, by PID, and waits for it.
func (p *phpProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// heard returns the lines of the role's stderr that start with prefix.
func (p *phpProc) heard(prefix string) string {
	var b strings.Builder
	for _, line := range strings.Split(p.err.String(), "\n") {
		if strings.HasPrefix(line, prefix) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// waitHeard waits, for at most 10 s, until the role has written n lines
// starting with prefix to stderr, and returns them; fewer if it never does.
func (p *phpProc) waitHeard(prefix string, n int) string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := p.heard(prefix)
		if strings.Count(got, "\n") >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait returns the role's output once it exits.
func (p *phpProc) wait(t *testing.T) string {
	t.Helper()
	<-p.done
	if !p.cmd.ProcessState.Success() {
		t.Errorf("php %s: %v\nstdout: %s\nstderr: %s", p.cmd.Args[2], p.cmd.ProcessState, p.out.String(), p.err.String())
	}
	return p.out.String()
}

// checkPHP compares a role's transcript with gearmand's, line by line.
func checkPHP(t *testing.T, role, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("php %s line %d: got %q, want %q", role, i+1, gl, wl)
		}
	}
}

// runPHPScenarios drives the server at addr with every role of the script.
// The admin status counts the one PHP worker once, also through a gateway
// that registers it on every upstream of its functions' pool.
func runPHPScenarios(t *testing.T, php, addr string) {
	// Foreground tasks of three priorities wait for a worker.
	prio := startPHP(t, php, 15*time.Second, "prio", addr, t.TempDir())
	waitStatus(t, addr, "order", "3\t0\t0")
	dir := t.TempDir()
	worker := startPHP(t, php, 30*time.Second, "worker", addr, dir)
	checkPHP(t, "prio", prio.wait(t), phpPrioWant)

	got := startPHP(t, php, 15*time.Second, "client", addr, dir).wait(t)
	checkPHP(t, "client", uuidRE.ReplaceAllString(got, "UNIQUE"), phpClientWant)
	// The job taken back from the worker ran again and left no trace.
	waitStatus(t, addr, "tmo", "0\t0\t1")
	if got := adminQuery(t, addr, "workers"); !strings.Contains(got, " php-worker : ") {
		t.Errorf("workers shows no php-worker (GearmanWorker::setId):\n%s", got)
	}
	// What the worker heard: two failed jobs, and an error for completing
	// the job the server had taken back. That error comes only once the
	// client lets the worker's function return (tmo-go), which the test
	// does not wait for otherwise: wait for it here.
	heard := worker.waitHeard("worker: ", strings.Count(phpWorkerWant, "\n"))
	worker.stop()
	checkPHP(t, "worker", heard, phpWorkerWant)
	checkPHP(t, "wtimeout", startPHP(t, php, 10*time.Second, "wtimeout", addr, t.TempDir()).wait(t), phpWorkerTimeoutWant)
	runPHPWorkerLost(t, php, addr)
}

// TestGearmanPHPStatusKeyTooLong asks for the status of jobs by a handle
// or unique ID too long for gearmand. libgearman cannot match a reply
// naming such a key to its request; only a closed connection lets the
// call return at once and the client go on (gearman_status_close.go).
func TestGearmanPHPStatusKeyTooLong(t *testing.T) {
	php := requirePHPGearman(t)
	run := func(t *testing.T, addr string) {
		checkPHP(t, "longkey", startPHP(t, php, 15*time.Second, "longkey", addr, t.TempDir()).wait(t), phpLongKeyWant)
	}
	t.Run("gearmand", func(t *testing.T) { run(t, testutil.StartGearmand(t)) })
	t.Run("jobgate", func(t *testing.T) { run(t, startJobgateGearman(t, gearman.Config{})) })
	t.Run("gateway-gearmand", func(t *testing.T) { run(t, startGatewayOverGearmand(t, 1)) })
}

// runPHPWorkerLost kills a PHP worker (SIGKILL) while it holds a
// foreground job: the server gives the job to the next worker and the
// waiting client gets that worker's result.
func runPHPWorkerLost(t *testing.T, php, addr string) {
	dir := t.TempDir()
	first := startPHP(t, php, 15*time.Second, "holder", addr, dir)
	client := startPHP(t, php, 15*time.Second, "holdc", addr, dir)
	grabbed := filepath.Join(dir, "grabbed")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(grabbed); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first worker never got the job")
		}
	}
	_ = first.cmd.Process.Kill()
	<-first.done
	if err := os.Remove(grabbed); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hold-go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	second := startPHP(t, php, 15*time.Second, "holder", addr, dir)
	checkPHP(t, "holdc", client.wait(t), "hold held GEARMAN_SUCCESS\n")
	second.stop()
	checkPHP(t, "holder", second.out.String(), "hold got x\n")
}

func TestGearmanPHPInterop(t *testing.T) {
	php := requirePHPGearman(t)
	t.Run("gearmand", func(t *testing.T) {
		runPHPScenarios(t, php, testutil.StartGearmand(t))
	})
	t.Run("jobgate", func(t *testing.T) {
		runPHPScenarios(t, php, startJobgateGearman(t, gearman.Config{}))
	})
	t.Run("gateway-gearmand", func(t *testing.T) {
		runPHPScenarios(t, php, startGatewayOverGearmand(t, 1))
	})
	// Functions sharded over two gearmands: one worker's functions, and
	// one client's jobs, live on both.
	t.Run("gateway-2-gearmand", func(t *testing.T) {
		runPHPScenarios(t, php, startGatewayOverGearmand(t, 2))
	})
	// The local engine and two gearmands in one shard pool.
	t.Run("gateway-local-2-gearmand", func(t *testing.T) {
		runPHPScenarios(t, php, startGatewayMix(t))
	})
}
