package proxy

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// Interoperability with gearmand's own tools (Debian gearman-tools) and
// Perl's Gearman::Client/Gearman::Worker (libgearman-client-perl).

// runTool runs a command to completion within a generous deadline.
func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// A child the tool leaves behind holding its output must not hang the
	// test past the limit.
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v\nstderr: %s", name, args, err, stderr.String())
	}
	return string(out)
}

// startTool starts a long-running command and stops it, by PID, when the
// test ends.
func startTool(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = testutil.ChildAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// adminQuery sends one admin line and returns the reply listing.
func adminQuery(t *testing.T, addr, line string) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	got, err := readText(bufio.NewReader(nc))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitStatus polls the admin status until fn's line is want.
func waitStatus(t *testing.T, addr, fn, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := adminQuery(t, addr, "status")
		for _, line := range strings.Split(got, "\n") {
			if line == fn+"\t"+want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed %s\t%s:\n%s", fn, want, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGearmanCLIInterop(t *testing.T) {
	gearmanBin := testutil.RequireBinary(t, "gearman")
	gearadmin := testutil.RequireBinary(t, "gearadmin")
	addr := startJobgateGearman(t, gearman.Config{Version: "9.9.9"})
	host, port, _ := net.SplitHostPort(addr)
	hp := []string{"-h", host, "-p", port}
	cli := func(args ...string) string {
		return runTool(t, gearmanBin, append(append([]string{}, hp...), args...)...)
	}

	checkCLIBackgroundOrder(t, gearmanBin, addr)

	// Foreground jobs through a CLI worker.
	startTool(t, gearmanBin, append(append([]string{}, hp...), "-w", "-f", "rev", "--", "rev")...)
	waitStatus(t, addr, "rev", "0\t0\t1")
	if got := cli("-f", "rev", "abc def"); got != "fed cba" {
		t.Fatalf("foreground: %q", got)
	}
	if got := cli("-I", "-f", "rev", "high"); got != "hgih" {
		t.Fatalf("high: %q", got)
	}
	if got := cli("-L", "-u", "u1", "-f", "rev", "low"); got != "wol" {
		t.Fatalf("low unique: %q", got)
	}

	// gearadmin.
	if got := runTool(t, gearadmin, append(append([]string{}, hp...), "--status")...); !strings.Contains(got, "rev\t0\t0\t1\n") || !strings.HasSuffix(got, ".\n") {
		t.Fatalf("gearadmin --status: %q", got)
	}
	if got := runTool(t, gearadmin, append(append([]string{}, hp...), "--workers")...); !strings.Contains(got, " : rev\n") {
		t.Fatalf("gearadmin --workers: %q", got)
	}
	cli("-b", "-f", "nobody", "queued")
	if got := runTool(t, gearadmin, append(append([]string{}, hp...), "--show-jobs")...); !strings.Contains(got, "\t0\t0\t1\n") {
		t.Fatalf("gearadmin --show-jobs: %q", got)
	}
	if got := runTool(t, gearadmin, append(append([]string{}, hp...), "--getpid")...); strings.TrimSpace(got) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("gearadmin --getpid: %q", got)
	}
	if got := runTool(t, gearadmin, append(append([]string{}, hp...), "--server-version")...); strings.TrimSpace(got) != "9.9.9" {
		t.Fatalf("gearadmin --server-version: %q", got)
	}
}

// checkCLIBackgroundOrder queues background jobs of three priorities
// with the gearman CLI before any worker exists (one connection each, and
// a unique id coalesced), then lets a CLI worker record the order it ran
// them in: highest priority first, and in submission order within one.
func checkCLIBackgroundOrder(t *testing.T, gearmanBin, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	hp := []string{"-h", host, "-p", port}
	cli := func(args ...string) string {
		return runTool(t, gearmanBin, append(append([]string{}, hp...), args...)...)
	}
	cli("-b", "-L", "-f", "order", "low")
	cli("-b", "-f", "order", "normal")
	cli("-b", "-I", "-f", "order", "high")
	cli("-b", "-u", "same", "-f", "order", "unique")
	cli("-b", "-u", "same", "-f", "order", "unique-again") // coalesced
	cli("-b", "-f", "order", "normal-2")
	waitStatus(t, addr, "order", "5\t0\t0")
	log := filepath.Join(t.TempDir(), "order.log")
	startTool(t, gearmanBin, append(append([]string{}, hp...), "-w", "-c", "5", "-f", "order", "--",
		"sh", "-c", "cat >> "+log+"; echo >> "+log)...)
	waitStatus(t, addr, "order", "0\t0\t0")
	got, _ := os.ReadFile(log)
	if string(got) != "high\nnormal\nunique\nnormal-2\nlow\n" {
		t.Fatalf("worker ran %q", got)
	}
}

// TestGearmanCLIBackgroundOrderThroughGateway: the background jobs of
// checkCLIBackgroundOrder, each from a gearman CLI connection of its own,
// reach a gearmand behind the gateway over the lines it shares
// (gearman_gateway_bgline.go) and run in the order they run in on
// gearmand itself.
func TestGearmanCLIBackgroundOrderThroughGateway(t *testing.T) {
	gearmanBin := testutil.RequireBinary(t, "gearman")
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) string
	}{
		{"gearmand", func(t *testing.T) string { return testutil.StartGearmand(t) }},
		{"gateway-gearmand", func(t *testing.T) string { return startGatewayOverGearmand(t, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) { checkCLIBackgroundOrder(t, gearmanBin, tc.start(t)) })
	}
}

// TestGearmanPerlInterop runs testdata/gearman_perl.pl (Perl
// Gearman::Client and Gearman::Worker) against a real gearmand, jobgate,
// a gateway in front of a gearmand, and a gateway sharding over the local
// engine and two gearmand: each must print the same.
func TestGearmanPerlInterop(t *testing.T) {
	perl := testutil.RequireBinary(t, "perl")
	testutil.RequireInstalled(t, "libgearman-client-perl", exec.Command(perl, "-MGearman::Client", "-MGearman::Worker", "-e", "1").Run())
	lines := []string{
		"rev status 1/2",
		"rev data chunk",
		"rev complete olleh",
		"fail fail",
		"exc exception boom",
		"exc fail", // a client without the exceptions option
		"background ok",
		"status known=1 running=0",
		"done",
	}
	want := strings.Join(lines, "\n") + "\n"
	// gearmand's WORK_FAIL for an exception kills Gearman::Client (see the
	// script); what it prints without that step must hold everywhere else.
	t.Run("gearmand", func(t *testing.T) {
		want := strings.Join(slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return l == "exc fail" }), "\n") + "\n"
		if got := runTool(t, perl, "testdata/gearman_perl.pl", testutil.StartGearmand(t), "gearmand"); got != want {
			t.Fatalf("perl client/worker:\n got  %q\n want %q", got, want)
		}
	})
	servers := []struct {
		name  string
		start func(t *testing.T) string
	}{
		{"jobgate", func(t *testing.T) string { return startJobgateGearman(t, gearman.Config{}) }},
		{"gateway-gearmand", func(t *testing.T) string { return startGatewayOverGearmand(t, 1) }},
		{"gateway-local-2-gearmand", startGatewayMix},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			if got := runTool(t, perl, "testdata/gearman_perl.pl", srv.start(t)); got != want {
				t.Fatalf("perl client/worker:\n got  %q\n want %q", got, want)
			}
		})
	}
}
