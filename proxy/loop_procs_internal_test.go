//go:build linux

package proxy

import (
	"runtime"
	"testing"
)

// TestRaiseProcs: one P becomes two unless GOMAXPROCS is set in the
// environment; more than one is left alone.
func TestRaiseProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		procs int
		env   string
		want  int
	}{
		{1, "", 2},
		{1, "1", 1},
		{3, "", 3},
	} {
		runtime.GOMAXPROCS(tc.procs)
		raiseProcs(tc.env)
		if got := runtime.GOMAXPROCS(0); got != tc.want {
			t.Errorf("GOMAXPROCS %d, env %q: now %d, want %d", tc.procs, tc.env, got, tc.want)
		}
	}
}
