// Package testutil starts the real reference servers (beanstalkd, gearmand)
// on free loopback ports for integration tests, and stops them by PID.
package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// RequireInstalled checks a library a test drives: err is what probing for
// it (loading it, finding its files) returned, and pkg the Debian package
// that provides it. When err is not nil the test fails under CI, as
// RequireBinary does, and is skipped elsewhere.
func RequireInstalled(t testing.TB, pkg string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (scripts/test.sh installs it): %v", pkg, err)
	}
	t.Skipf("%s is not installed; run scripts/test.sh to install it: %v", pkg, err)
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
//
// It also checks that the listener belongs to the process it started: a
// port taken by another process between FreePort and the server's bind
// would otherwise send the test to the wrong server, so that counts as a
// failed start and is retried on another port.
func StartServer(t testing.TB, name string, args func(port int) []string) string {
	t.Helper()
	path := RequireBinary(t, name)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := FreePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(path, args(port)...)
		cmd.SysProcAttr = ChildAttr()
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		err := waitListening(addr, exited, 10*time.Second)
		if err == nil {
			err = CheckListener(port, cmd.Process.Pid)
		}
		if err != nil {
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

// ListenerOwner returns the id of the process that holds the listening TCP
// socket on port, read from /proc (Linux), without talking to the server:
// a question would change the counters that tests compare with jobgate's.
func ListenerOwner(port int) (int, error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("no listening socket on port %d", port)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, proc := range procs {
		if _, err := strconv.Atoi(proc.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + proc.Name() + "/fd")
		for _, fd := range fds {
			if link, err := os.Readlink("/proc/" + proc.Name() + "/fd/" + fd.Name()); err == nil && inodes[link] {
				return strconv.Atoi(proc.Name())
			}
		}
	}
	return 0, fmt.Errorf("no process holds the listener on port %d", port)
}

// CheckListener returns an error unless process pid holds the listener on
// port. The socket can take a moment after the first successful dial to
// show in /proc, so it is read a few times.
func CheckListener(port, pid int) error {
	var owner int
	var err error
	for range 20 {
		if owner, err = ListenerOwner(port); err == nil && owner == pid {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("port %d is held by pid %d, not by pid %d: taken by another process", port, owner, pid)
}
