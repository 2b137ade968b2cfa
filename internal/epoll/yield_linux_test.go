package epoll

import (
	"syscall"
	"testing"
	"time"
)

// TestYielderPeriod: the yield comes once YieldEvery has passed, checked
// every yieldCheck calls, and not again until YieldEvery more has passed.
func TestYielderPeriod(t *testing.T) {
	now := time.Unix(1000, 0)
	yields := 0
	y := yielder{now: func() time.Time { return now }, yield: func() { yields++ }}
	calls := func(n int) {
		for range n {
			y.maybeYield()
		}
	}
	calls(yieldCheck) // the first check: nothing yielded before
	if yields != 1 {
		t.Fatalf("first check: %d yields, want 1", yields)
	}
	now = now.Add(YieldEvery - time.Microsecond)
	calls(4 * yieldCheck)
	if yields != 1 {
		t.Fatalf("before YieldEvery: %d yields, want 1", yields)
	}
	now = now.Add(time.Microsecond)
	calls(yieldCheck - 1)
	if yields != 1 {
		t.Fatalf("between checks: %d yields, want 1", yields)
	}
	calls(1)
	if yields != 2 {
		t.Fatalf("at YieldEvery: %d yields, want 2", yields)
	}
}

// TestWaitYields: Wait goes through the yield check, so a loop that only
// ever calls Wait and raw system calls still yields.
func TestWaitYields(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	now := time.Unix(1000, 0)
	yields := 0
	p.yield.now = func() time.Time { return now }
	p.yield.yield = func() { yields++ }
	var evs [1]syscall.EpollEvent
	for range 3 * yieldCheck {
		now = now.Add(YieldEvery)
		if _, err := p.Wait(evs[:], 0); err != nil {
			t.Fatal(err)
		}
	}
	if yields != 3 {
		t.Fatalf("%d yields over %d waits %v apart, want 3", yields, 3*yieldCheck, YieldEvery)
	}
}
