//go:build linux

package testutil

import "syscall"

// ChildAttr returns the process attributes for a server a test starts: its
// own process group, and SIGKILL when the test binary dies, so that a test
// that panics or is killed by its timeout leaves no server behind holding a
// port. (The signal follows the thread that started the child; Go keeps its
// threads unless a goroutine exits locked to one, which no test does.)
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
