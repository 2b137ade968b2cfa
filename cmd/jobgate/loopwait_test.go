package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/config"
)

// TestLoopWaitFlag: -loop-wait takes auto or park, defaults to auto, and
// anything else is a command-line error.
func TestLoopWaitFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, config.LoopWaitAuto},
		{[]string{"-loop-wait", "park"}, config.LoopWaitPark},
		{[]string{"-loop-wait=auto"}, config.LoopWaitAuto},
	} {
		var stderr bytes.Buffer
		cfg, code := parseCommandLine(tc.args, &stderr)
		if cfg == nil || code != 0 {
			t.Fatalf("%q: exit %d, %s", tc.args, code, stderr.String())
		}
		if cfg.LoopWait != tc.want {
			t.Errorf("%q: loop_wait %q, want %q", tc.args, cfg.LoopWait, tc.want)
		}
	}
	var stderr bytes.Buffer
	if cfg, code := parseCommandLine([]string{"-loop-wait", "spin"}, &stderr); cfg != nil || code != 2 {
		t.Errorf("-loop-wait spin: got config, exit %d", code)
	}
	if want := `loop_wait: "spin" is not auto or park`; !strings.Contains(stderr.String(), want) {
		t.Errorf("-loop-wait spin: stderr %q lacks %q", stderr.String(), want)
	}
}

// TestIOUringFlag: io_uring is on by default and -io-uring=false turns
// it off, for the loops opened after the settings are applied.
func TestIOUringFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"-io-uring=false"}, false},
		{[]string{"-io-uring"}, true},
	} {
		var stderr bytes.Buffer
		cfg, code := parseCommandLine(tc.args, &stderr)
		if cfg == nil || code != 0 {
			t.Fatalf("%q: exit %d, %s", tc.args, code, stderr.String())
		}
		if cfg.IOUring != tc.want {
			t.Errorf("%q: io_uring %v, want %v", tc.args, cfg.IOUring, tc.want)
		}
	}
}
