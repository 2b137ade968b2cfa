//go:build !unix

package testutil

import "testing"

// SignalDrain skips the test: drain mode's signal, SIGUSR1, exists only on
// Unix.
func SignalDrain(t testing.TB, pid int) {
	t.Helper()
	t.Skip("drain mode's SIGUSR1 needs Unix")
}
