//go:build unix && !linux

package testutil

import "syscall"

// ChildAttr returns the process attributes for a server a test starts: its
// own process group. (Only Linux can also kill it when the test binary
// dies.)
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
