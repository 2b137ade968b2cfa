// Package testutil starts the real reference servers (beanstalkd, gearmand)
// on free loopback ports for integration tests, and stops them by PID.
package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// RequireBinary returns the path of the named program. When it is missing
// the test fails under CI (the test command installs it, so absence is a
// broken setup) and is skipped elsewhere.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (scripts/test.sh installs it): %v", name, err)
	}
	t.Skipf("%s is not installed; run scripts/test.sh to install it", name)
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Programs that cannot listen on port 0 and report it need this; the small
// race with other processes is handled by StartServer retrying.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartServer runs the program built by args(port) on a free loopback port,
// waits until it accepts connections, and stops it (by PID) when the test
// ends. It returns "127.0.0.1:PORT".
func StartServer(t testing.TB, name string, args func(port int) []string) string {
	t.Helper()
	path := RequireBinary(t, name)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := FreePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(path, args(port)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if err := waitListening(addr, exited, 10*time.Second); err != nil {
			lastErr = err
			stop(cmd, exited)
			continue
		}
		t.Cleanup(func() { stop(cmd, exited) })
		return addr
	}
	t.Fatalf("%s did not start: %v", name, lastErr)
	return ""
}

// StartBeanstalkd starts a real beanstalkd with extra flags (e.g. "-z", "100").
func StartBeanstalkd(t testing.TB, extra ...string) string {
	t.Helper()
	return StartServer(t, "beanstalkd", func(port int) []string {
		return append([]string{"-l", "127.0.0.1", "-p", strconv.Itoa(port)}, extra...)
	})
}

// StartGearmand starts a real gearmand in its fastest single-threaded mode
// with logging off, plus extra flags.
func StartGearmand(t testing.TB, extra ...string) string {
	t.Helper()
	return StartServer(t, "gearmand", func(port int) []string {
		return append([]string{"--listen=127.0.0.1", "--port=" + strconv.Itoa(port),
			"--threads=0", "--log-file=none"}, extra...)
	})
}

func waitListening(addr string, exited <-chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		select {
		case err := <-exited:
			return fmt.Errorf("exited before listening on %s: %v", addr, err)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v: %v", addr, limit, err)
		}
		time.Sleep(delay)
	}
}

// stop kills the process by PID and waits for it.
func stop(cmd *exec.Cmd, exited <-chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}
