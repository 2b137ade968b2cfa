package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/epoll"
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

// TestApplyLoopSpin: loop_spin reaches the event loops opened after the
// settings are applied (with more than one P), and 0 turns it off again.
func TestApplyLoopSpin(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	cfg := config.Default()
	defer epoll.SetSpin(0)
	for _, want := range []time.Duration{30 * time.Microsecond, 0} {
		cfg.LoopSpin = want
		applyLoopWait(cfg)
		p, ev, err := epoll.NewWoken(-1)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Spin(); got != want {
			t.Errorf("loop_spin %v: a new loop spins %v", want, got)
		}
		p.Close()
		ev.Close()
	}
}
