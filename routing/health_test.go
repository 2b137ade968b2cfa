package routing

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

func TestHealth(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	var fail atomic.Bool
	var probes atomic.Int32
	var changes []bool
	h, err := NewHealth(HealthConfig{
		Clock:    clk,
		Interval: time.Second,
		Rise:     2,
		Fall:     3,
		Probe: func(ctx context.Context) error {
			probes.Add(1)
			if _, ok := ctx.Deadline(); !ok {
				t.Error("probe without a deadline")
			}
			if fail.Load() {
				return errors.New("down")
			}
			return nil
		},
		OnChange: func(up bool) { changes = append(changes, up) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !h.Up() {
		t.Fatal("starts down")
	}
	h.Start()
	h.Start() // idempotent: still one timer
	if clk.Pending() != 1 {
		t.Fatalf("%d timers", clk.Pending())
	}
	step := func(n int) {
		for range n {
			clk.Advance(time.Second)
		}
	}
	step(3)
	if probes.Load() != 3 || !h.Up() {
		t.Fatalf("probes %d up %v", probes.Load(), h.Up())
	}
	fail.Store(true)
	step(2)
	if !h.Up() {
		t.Fatal("down after 2 failures, fall is 3")
	}
	step(1)
	if h.Up() {
		t.Fatal("up after 3 failures")
	}
	fail.Store(false)
	step(1)
	if h.Up() {
		t.Fatal("up after 1 success, rise is 2")
	}
	step(1)
	if !h.Up() {
		t.Fatal("down after 2 successes")
	}
	if len(changes) != 2 || changes[0] || !changes[1] {
		t.Fatalf("changes %v", changes)
	}
	h.Stop()
	n := probes.Load()
	step(5)
	if probes.Load() != n || clk.Pending() != 0 {
		t.Fatalf("probed after Stop")
	}
	// Fall is 3: the third failure in a row, and only it, reports the change.
	for i, want := range []bool{false, false, true} {
		if got := h.Observe(errors.New("x")); got != want {
			t.Fatalf("failure %d: Observe = %v, want %v", i+1, got, want)
		}
	}
	if h.Up() {
		t.Fatal("up after 3 observed failures")
	}
	var nilH *Health
	if !nilH.Up() {
		t.Fatal("nil health is down")
	}
}

func TestNewHealthErrors(t *testing.T) {
	if _, err := NewHealth(HealthConfig{}); err == nil {
		t.Error("no probe accepted")
	}
	if _, err := NewHealth(HealthConfig{Probe: func(context.Context) error { return nil }, Rise: -1}); err == nil {
		t.Error("negative rise accepted")
	}
}
