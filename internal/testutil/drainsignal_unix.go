//go:build unix

package testutil

import (
	"syscall"
	"testing"
)

// SignalDrain sends SIGUSR1, which puts beanstalkd and jobgate in drain
// mode, to process pid.
func SignalDrain(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
}
