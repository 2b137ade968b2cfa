package clock

import (
	"testing"
	"time"
)

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFake(start)
	var got []string
	var at []time.Duration
	record := func(name string) func() {
		return func() { got = append(got, name); at = append(at, c.Now().Sub(start)) }
	}
	c.AfterFunc(3*time.Second, record("c"))
	c.AfterFunc(time.Second, record("a"))
	stopped := c.AfterFunc(2*time.Second, record("never"))
	c.AfterFunc(2*time.Second, record("b"))
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop reported true")
	}
	c.Advance(2 * time.Second)
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("after 2s fired %v, want [a b]", got)
	}
	if at[0] != time.Second || at[1] != 2*time.Second {
		t.Fatalf("timers saw times %v, want their deadlines", at)
	}
	if c.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1", c.Pending())
	}
	c.Advance(time.Second)
	if len(got) != 3 || got[2] != "c" {
		t.Fatalf("after 3s fired %v", got)
	}
	if !c.Now().Equal(start.Add(3 * time.Second)) {
		t.Fatalf("Now = %v", c.Now())
	}
}

func TestFakeTimerScheduledByTimer(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	fired := 0
	c.AfterFunc(time.Second, func() {
		c.AfterFunc(time.Second, func() { fired++ })
	})
	c.Advance(5 * time.Second)
	if fired != 1 {
		t.Fatalf("chained timer fired %d times, want 1", fired)
	}
}

func TestFakeZeroDelayFiresOnAdvanceZero(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	fired := false
	c.AfterFunc(0, func() { fired = true })
	c.Advance(0)
	if !fired {
		t.Fatal("zero-delay timer did not fire on Advance(0)")
	}
}
