package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/proxy"
)

func TestGearmanWorkloads(t *testing.T) {
	srv, err := proxy.NewGearmanServer(proxy.GearmanConfig{})
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
	for _, tc := range []struct{ workload, want string }{
		{"fg", "jobs=300 "},
		{"bg", "jobs=300 "},
		{"echo", "echoes=300 "},
	} {
		var out, errb bytes.Buffer
		code := runGearman([]string{"-addr", l.Addr().String(), "-workload", tc.workload, "-n", "300", "-clients", "4", "-body-size", "10"}, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), tc.want) || !strings.Contains(out.String(), "p99=") {
			t.Fatalf("%s: code %d\nstdout: %s\nstderr: %s", tc.workload, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := runGearman([]string{"-workload", "nope"}, &out, &errb); code != 2 {
		t.Fatalf("bad workload: code %d", code)
	}
}
