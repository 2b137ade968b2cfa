package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jobgate/jobgate/proxy"
)

// TestBeanstalkResultLine runs every workload against jobgate's engine and
// checks the line scripts read: a positive rate, latencies, and CPU fields
// (this process stands in for server and proxy).
func TestBeanstalkResultLine(t *testing.T) {
	addr := startBeanstalkEngine(t)
	pid := strconv.Itoa(os.Getpid())
	line := regexp.MustCompile(`(?m)^result ops_per_s=([0-9]+) p50_us=[0-9.]+ p99_us=[0-9.]+ server_cpu_us=[0-9.]+ proxy_cpu_us=[0-9.]+ gen_cpu_us=[0-9.]+$`)
	for _, wl := range []string{"put", "pipelined-put", "reserve-delete", "cycle"} {
		var out, errb bytes.Buffer
		args := []string{"-addr", addr, "-workload", wl, "-n", "300", "-conns", "2",
			"-producers", "2", "-consumers", "2", "-pipeline", "10", "-pid", pid, "-proxy-pid", pid}
		if code := runBeanstalk(args, &out, &errb); code != 0 {
			t.Fatalf("%s: code %d\nstdout: %s\nstderr: %s", wl, code, out.String(), errb.String())
		}
		m := line.FindStringSubmatch(out.String())
		if m == nil || m[1] == "0" {
			t.Fatalf("%s: no result line with a rate in\n%s", wl, out.String())
		}
	}
	var out, errb bytes.Buffer
	if code := runBeanstalk([]string{"-compare", "127.0.0.1:1", "-proxy-pid", pid}, &out, &errb); code != 2 {
		t.Fatalf("-proxy-pid with -compare: code %d, want 2", code)
	}
	if code := runBeanstalk([]string{"-compare-pid", pid}, &out, &errb); code != 2 {
		t.Fatalf("-compare-pid without -compare: code %d, want 2", code)
	}
	if code := runBeanstalk([]string{"-loops", "0"}, &out, &errb); code != 2 {
		t.Fatalf("-loops 0: code %d, want 2", code)
	}
	// Both servers measured: the summary gives each one's CPU per job.
	out.Reset()
	args := []string{"-addr", addr, "-compare", addr, "-workload", "put", "-n", "300",
		"-conns", "2", "-pid", pid, "-compare-pid", pid}
	if code := runBeanstalk(args, &out, &errb); code != 0 {
		t.Fatalf("compare: code %d\nstderr: %s", code, errb.String())
	}
	sum := regexp.MustCompile(`(?m)^summary workload=put .* ratio=[0-9.]+ \(1 rounds\); p99 [0-9]+/[0-9]+ us; server cpu [0-9.]+/[0-9.]+ us per job(, ratio=[0-9.]+)?; generator cpu [0-9.]+/[0-9.]+ us per job$`)
	if !sum.MatchString(out.String()) {
		t.Fatalf("no summary with CPU per job in\n%s", out.String())
	}
}

// TestBeanstalkCompareFlipsOrder checks that with -compare the two
// servers take turns running first, round by round: the run before
// weighs on the next one, so a fixed order would favour one server.
func TestBeanstalkCompareFlipsOrder(t *testing.T) {
	addrs := [2]string{startBeanstalkEngine(t), startBeanstalkEngine(t)}
	var out, errb bytes.Buffer
	args := []string{"-addr", addrs[0], "-compare", addrs[1], "-workload", "put", "-n", "50", "-conns", "1", "-rounds", "3"}
	if code := runBeanstalk(args, &out, &errb); code != 0 {
		t.Fatalf("code %d\nstderr: %s", code, errb.String())
	}
	var order []string
	for _, m := range regexp.MustCompile(`(?m)^workload=put addr=(\S+) `).FindAllStringSubmatch(out.String(), -1) {
		order = append(order, m[1])
	}
	a, b := addrs[0], addrs[1]
	if want := []string{a, b, b, a, a, b}; !slices.Equal(order, want) {
		t.Fatalf("runs in the order %q, want %q", order, want)
	}
	if !regexp.MustCompile(`(?m)^summary workload=put median rate ` + regexp.QuoteMeta(a) + `=[0-9]+ ` + regexp.QuoteMeta(b) + `=`).MatchString(out.String()) {
		t.Fatalf("the summary does not name -addr first:\n%s", out.String())
	}
}

// startBeanstalkEngine serves jobgate's Beanstalk engine on a free
// loopback port until the test ends, and returns its address.
func startBeanstalkEngine(t *testing.T) string {
	t.Helper()
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return l.Addr().String()
}
