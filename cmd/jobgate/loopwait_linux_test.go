package main

import (
	"testing"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/uring"
)

// TestApplyIOUring: io_uring false makes the batches opened afterwards
// use plain system calls; true lets them use a ring again.
func TestApplyIOUring(t *testing.T) {
	cfg := config.Default()
	defer uring.Disable(false)
	cfg.IOUring = false
	applyLoopWait(cfg)
	off := uring.New()
	defer off.Close()
	if off.Ring() {
		t.Fatal("io_uring false: a batch still has a ring")
	}
	cfg.IOUring = true
	applyLoopWait(cfg)
	on := uring.New()
	defer on.Close()
	if !on.Ring() {
		t.Skip("io_uring unavailable here")
	}
}
