package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// shiftedClocks reads the real clocks with the wall clock moved by *off
// nanoseconds, as NTP slewing or a step would move it.
func shiftedClocks(off *atomic.Int64) func() (time.Time, int64) {
	return func() (time.Time, int64) {
		t := time.Now()
		return t, t.UnixNano() + off.Load()
	}
}

// readUntilRefreshed reads c from several goroutines until each has seen
// at least n new bases, and fails if any goroutine's readings go back.
func readUntilRefreshed(t *testing.T, c *leanClock, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(5 * time.Second)
			prev, bases, last := c.unixNano(), 0, c.base.Load()
			for bases < n && time.Now().Before(deadline) {
				v := c.unixNano()
				if v < prev {
					t.Errorf("clock went back %d ns", prev-v)
					return
				}
				prev = v
				if b := c.base.Load(); b != last {
					bases, last = bases+1, b
				}
			}
			if bases < n {
				t.Errorf("saw %d new bases in 5 s, want %d", bases, n)
			}
		}()
	}
	wg.Wait()
}

// TestLeanClockMonotonic: readings never go back, across refreshes and
// from concurrent readers, while the wall clock runs far slower than the
// monotonic one (by 20 µs in every 100 µs; NTP slews by 0.05% at most).
func TestLeanClockMonotonic(t *testing.T) {
	var off atomic.Int64
	c := newLeanClock(shiftedClocks(&off), 50*time.Microsecond)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // slew: the wall clock loses 20 µs at a time
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			off.Add(-20_000)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	readUntilRefreshed(t, c, 20)
	close(stop)
	<-done
}

// TestLeanClockFollowsWall: readings stay within the refresh period of
// the wall clock, and a step back of more than leanClockStep is followed,
// as time.Now() would show it.
func TestLeanClockFollowsWall(t *testing.T) {
	var off atomic.Int64
	c := newLeanClock(shiftedClocks(&off), time.Millisecond)
	near := func(what string) {
		t.Helper()
		got := c.unixNano()
		_, want := shiftedClocks(&off)()
		if d := want - got; d < 0 || d > int64(10*time.Millisecond) {
			t.Errorf("%s: clock %d ns behind the wall clock", what, d)
		}
	}
	near("start")
	off.Store(-int64(time.Hour)) // a step back
	deadline := time.Now().Add(5 * time.Second)
	for c.unixNano() > time.Now().UnixNano()-int64(time.Hour)+int64(time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not follow a step of the wall clock back")
		}
	}
	near("after the step")
	if d := time.Now().UnixNano() - leanNow(); d < -int64(leanClockRefresh) || d > int64(leanClockRefresh) {
		t.Errorf("leanNow is %d ns from time.Now", d)
	}
}

// TestJobSpansInOrder: the spans of one job, timed by the proxy's
// readings (Tracer.Now) and the spans' own, keep their order: send,
// receive, process, each ending no earlier than it started.
func TestJobSpansInOrder(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	for i := 0; i < 200; i++ {
		send := tr.StartSendBare(context.Background(), tr.Now())
		send.Describe(Message{Operation: "SUBMIT_JOB", Destination: "f"})
		send.CreatedNum("H:x:", uint64(i+1))
		p := tr.Deliver(send.Creation(), Message{Operation: "JOB_ASSIGN", Destination: "f", Start: tr.Now()})
		p.Data(3)
		p.Complete()
	}
	spans := rec.Ended()
	if len(spans) != 600 {
		t.Fatalf("%d spans, want 600", len(spans))
	}
	for i := 0; i < len(spans); i += 3 {
		s, r, p := spans[i], spans[i+1], spans[i+2]
		steps := []time.Time{s.StartTime(), s.EndTime(), r.StartTime(), r.EndTime(), p.StartTime(),
			p.Events()[0].Time, p.EndTime()}
		for k := 1; k < len(steps); k++ {
			if steps[k].Before(steps[k-1]) {
				t.Fatalf("job %d: step %d at %v, before step %d at %v", i/3, k, steps[k], k-1, steps[k-1])
			}
		}
		if !r.EndTime().Equal(p.StartTime()) {
			t.Errorf("job %d: receive ends at %v, process starts at %v", i/3, r.EndTime(), p.StartTime())
		}
	}
}

// TestLeanClockReadGap: a refresh whose wall clock reading lags its
// monotonic one (the thread descheduled between the two) is not taken for
// a step back of the wall clock: the readings do not go back.
func TestLeanClockReadGap(t *testing.T) {
	var gaps atomic.Int32
	read := func() (time.Time, int64) {
		now := time.Now()
		wall := now.UnixNano()
		if gaps.Add(-1) >= 0 {
			wall -= int64(5 * time.Millisecond)
		}
		return now, wall
	}
	c := newLeanClock(read, 0) // every reading refreshes
	prev := c.unixNano()
	gaps.Store(1)
	if v := c.unixNano(); v < prev {
		t.Fatalf("the clock went back %v after a read gap", time.Duration(prev-v))
	}
}
