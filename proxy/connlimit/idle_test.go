package connlimit

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestIdleFiresAfterQuiet(t *testing.T) {
	clk := clock.NewFake(epoch)
	var fired atomic.Int32
	i := NewIdle(clk, 10*time.Second, func() { fired.Add(1) })
	check := func(step string, want int32) {
		t.Helper()
		if got := fired.Load(); got != want {
			t.Fatalf("%s: fired %d times, want %d", step, got, want)
		}
	}
	clk.Advance(9 * time.Second)
	check("9s quiet", 0)
	i.Touch() // a frame at 9s: idle now counts from 9s
	clk.Advance(9 * time.Second)
	check("18s (9s after the frame)", 0)
	clk.Advance(999 * time.Millisecond)
	check("18.999s", 0)
	clk.Advance(time.Millisecond)
	check("19s (10s after the frame)", 1)
	i.Touch()
	clk.Advance(time.Hour)
	check("after firing, touches do nothing", 1)
	if i.Stop() {
		t.Error("Stop after firing reported a pending call")
	}
}

func TestIdlePendingIsNotIdle(t *testing.T) {
	clk := clock.NewFake(epoch)
	var fired atomic.Int32
	i := NewIdle(clk, 10*time.Second, func() { fired.Add(1) })
	i.Touch()
	i.Begin() // e.g. reserve with no job ready: the worker waits quietly
	i.Begin() // and holds a reserved job
	clk.Advance(time.Hour)
	if fired.Load() != 0 {
		t.Fatal("fired while requests were pending")
	}
	i.End()
	clk.Advance(time.Hour)
	if fired.Load() != 0 || i.Pending() != 1 {
		t.Fatalf("fired %d with %d pending", fired.Load(), i.Pending())
	}
	i.End() // nothing pending from now
	i.End() // an extra End is ignored
	clk.Advance(10*time.Second - time.Nanosecond)
	if fired.Load() != 0 {
		t.Fatal("fired before the timeout counted from the last End")
	}
	clk.Advance(time.Nanosecond)
	if fired.Load() != 1 {
		t.Fatalf("fired %d times, want 1", fired.Load())
	}
}

func TestIdleStopAndDisabled(t *testing.T) {
	clk := clock.NewFake(epoch)
	var fired atomic.Int32
	i := NewIdle(clk, time.Second, func() { fired.Add(1) })
	if !i.Stop() {
		t.Error("Stop of a running Idle reported nothing pending")
	}
	clk.Advance(time.Hour)
	if fired.Load() != 0 || clk.Pending() != 0 {
		t.Errorf("fired %d, %d timers left", fired.Load(), clk.Pending())
	}

	off := NewIdle(clk, 0, func() { fired.Add(1) })
	off.Touch()
	off.Begin()
	off.End()
	clk.Advance(time.Hour)
	if fired.Load() != 0 || clk.Pending() != 0 {
		t.Errorf("disabled Idle: fired %d, %d timers", fired.Load(), clk.Pending())
	}
}

// TestIdleTimerCount: touching per frame does not create a timer per frame.
func TestIdleTimerCount(t *testing.T) {
	clk := clock.NewFake(epoch)
	i := NewIdle(clk, 10*time.Second, func() {})
	for range 1000 {
		i.Touch()
		clk.Advance(time.Millisecond)
	}
	if n := clk.Pending(); n != 1 {
		t.Errorf("%d timers pending, want 1", n)
	}
	i.Stop()
}

// TestIdleClosesConn drives a real connection's read loop: idle cut-off
// closes the connection and the loop ends.
func TestIdleClosesConn(t *testing.T) {
	clk := clock.NewFake(epoch)
	server, client := net.Pipe()
	defer client.Close()
	var reason atomic.Value
	idle := NewIdle(clk, 30*time.Second, func() {
		reason.Store(ReasonIdle)
		server.Close()
	})
	frames := make(chan struct{})
	loopDone := make(chan error, 1)
	go func() { // the connection's read loop
		buf := make([]byte, 16)
		for {
			if _, err := server.Read(buf); err != nil {
				loopDone <- err
				return
			}
			idle.Touch()
			frames <- struct{}{}
		}
	}()
	client.Write([]byte("stats\r\n"))
	<-frames
	clk.Advance(29 * time.Second)
	client.Write([]byte("stats\r\n"))
	<-frames
	clk.Advance(29 * time.Second)
	select {
	case err := <-loopDone:
		t.Fatalf("read loop ended early: %v", err)
	default:
	}
	clk.Advance(time.Second)
	if err := <-loopDone; err == nil {
		t.Fatal("read loop ended without an error")
	}
	if reason.Load() != ReasonIdle {
		t.Error("onIdle not called")
	}
}
