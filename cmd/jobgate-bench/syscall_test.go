package main

import (
	"bytes"
	"fmt"
	"testing"
)

func TestSyscallCost(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"syscall"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	var ns int64
	if _, err := fmt.Sscanf(out.String(), "syscall_ns=%d\n", &ns); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if ns <= 0 {
		t.Fatalf("a system call took %d ns", ns)
	}
	if code := run([]string{"syscall", "extra"}, &out, &errs); code != 2 {
		t.Fatalf("an argument: exit %d, want 2", code)
	}
}
