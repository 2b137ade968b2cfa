package testutil

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// StartOwned runs the program name with args, to listen on port of
// 127.0.0.1, and returns its process once that port answers and belongs to
// it. Unlike StartServer, the port is the caller's and so is the process:
// fault tests kill it and start it again on the same port, by PID
// (cmd.Process.Kill, then cmd.Wait). Whatever still runs at the end of the
// test is killed.
func StartOwned(t testing.TB, name string, port int, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(RequireBinary(t, name), args...)
	cmd.SysProcAttr = ChildAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if nc, err := net.Dial("tcp", addr); err == nil {
			nc.Close()
			if err := CheckListener(port, cmd.Process.Pid); err != nil {
				t.Fatalf("%s on %s: %v", name, addr, err)
			}
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s did not start", name, addr)
		}
	}
}
