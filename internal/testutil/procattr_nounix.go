//go:build !unix

package testutil

import "syscall"

// ChildAttr returns no process attributes: there are no process groups
// here.
func ChildAttr() *syscall.SysProcAttr { return nil }
