package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestGearmanFlags(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	parse := func(args ...string) *gearmanFlags {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		var f gearmanFlags
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	f := parse("-gearman-handle-prefix=H:test", "-gearman-job-retries=3", "-gearman-max-packet-size=1024", "-gearman-exceptions", "-gearman-admin-shutdown")
	if f.handlePrefix != "H:test" || f.jobRetries != 3 || f.maxPacketSize != 1024 || !f.exceptions || !f.adminShutdown {
		t.Fatalf("flags %+v", f)
	}
	if srv, err := f.newServer(log); err != nil || srv == nil {
		t.Fatalf("newServer: %v", err)
	}
	if _, err := parse("-gearman-handle-prefix=" + strings.Repeat("x", 60)).newServer(log); err == nil {
		t.Fatal("a 60-byte handle prefix was accepted")
	}
	if _, err := parse("-gearman-job-retries=-1").newServer(log); err == nil {
		t.Fatal("negative retries accepted")
	}
}
