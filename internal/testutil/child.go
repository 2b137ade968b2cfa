package testutil

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Child is a server run in a child process: this test binary re-run as
// one helper test, for tests that kill a server with SIGKILL.
type Child struct {
	Cmd  *exec.Cmd
	Addr string // what the child printed as "ADDR host:port"
}

// StartChild re-runs this test binary as the test named helper, with the
// environment variable env set to value, and waits for the helper to print
// "ADDR host:port" on its standard output. The child is killed when the
// test ends.
func StartChild(t testing.TB, helper, env, value string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$")
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.SysProcAttr = ChildAttr()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{Cmd: cmd}
	t.Cleanup(c.Kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "ADDR ") {
		t.Fatalf("child said %q (%v)", line, err)
	}
	c.Addr = strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
	return c
}

// Kill sends SIGKILL to the child, by its pid, and reaps it; it may be
// called more than once.
func (c *Child) Kill() {
	if c.Cmd.ProcessState == nil {
		c.Cmd.Process.Kill()
		c.Cmd.Wait()
	}
}
