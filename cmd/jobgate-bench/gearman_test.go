package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/proxy"
)

func TestGearmanWorkloads(t *testing.T) {
	srv, err := proxy.NewGearmanServer(proxy.GearmanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, srv)
	for _, tc := range []struct {
		workload, want string
		flags          []string
	}{
		{"fg", "jobs=300 ", nil},
		{"fg", "jobs=300 ", []string{"-window", "4", "-loops", "2"}},
		{"fg", "jobs=300 ", []string{"-goroutines", "-window", "3"}},
		{"bg", "jobs=300 ", nil},
		{"bg", "jobs=300 ", []string{"-goroutines"}},
		{"echo", "echoes=300 ", []string{"-window", "5"}},
		{"echo", "echoes=300 ", []string{"-goroutines"}},
		{"bg", "proxy_cpu_us=", []string{"-proxy-pid", strconv.Itoa(os.Getpid())}},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"-addr", addr, "-workload", tc.workload, "-n", "300", "-clients", "4", "-body-size", "10"}, tc.flags...)
		code := runGearman(args, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), tc.want) || !strings.Contains(out.String(), "p99=") {
			t.Fatalf("%s %v: code %d\nstdout: %s\nstderr: %s", tc.workload, tc.flags, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := runGearman([]string{"-workload", "nope"}, &out, &errb); code != 2 {
		t.Fatalf("bad workload: code %d", code)
	}
}
