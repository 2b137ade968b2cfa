package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
)

// parseOK parses args as jobgate's command line and fails the test if
// they are refused.
func parseOK(t *testing.T, args []string) *config.Config {
	t.Helper()
	var stderr bytes.Buffer
	cfg, code := parseCommandLine(args, &stderr)
	if cfg == nil || code != 0 {
		t.Fatalf("%q: exit %d, %s", args, code, stderr.String())
	}
	return cfg
}

// parseRefused checks that args are refused as a command-line error
// (exit 2) whose message contains want.
func parseRefused(t *testing.T, args []string, want string) {
	t.Helper()
	var stderr bytes.Buffer
	if cfg, code := parseCommandLine(args, &stderr); cfg != nil || code != 2 {
		t.Errorf("%q: got config, exit %d", args, code)
	}
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("%q: stderr %q lacks %q", args, stderr.String(), want)
	}
}

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
		if got := parseOK(t, tc.args).LoopWait; got != tc.want {
			t.Errorf("%q: loop_wait %q, want %q", tc.args, got, tc.want)
		}
	}
	parseRefused(t, []string{"-loop-wait", "spin"}, `loop_wait: "spin" is not auto or park`)
}

// TestLoopSpinFlag: -loop-spin takes a duration up to 1ms; left out, the
// loops spin 30us unless an upstream is on a loopback address, where
// only the flag makes them spin. A longer one is a command-line error.
func TestLoopSpinFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 30 * time.Microsecond},
		{[]string{"-loop-spin", "0s"}, 0},
		{[]string{"-loop-spin=1ms"}, time.Millisecond},
		{[]string{"-gearman-upstream", "127.0.0.1:14730"}, 0},
		{[]string{"-beanstalk-upstream", "192.0.2.7:11300"}, 30 * time.Microsecond},
		{[]string{"-gearman-upstream", "127.0.0.1:14730", "-loop-spin", "20us"}, 20 * time.Microsecond},
	} {
		if got := parseOK(t, tc.args).EventLoopSpin(); got != tc.want {
			t.Errorf("%q: the loops spin %v, want %v", tc.args, got, tc.want)
		}
	}
	parseRefused(t, []string{"-loop-spin", "5ms"}, "loop_spin: 5ms is not between 0 and 1ms")
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
		if got := parseOK(t, tc.args).IOUring; got != tc.want {
			t.Errorf("%q: io_uring %v, want %v", tc.args, got, tc.want)
		}
	}
}
