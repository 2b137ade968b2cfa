package epoll

import (
	"runtime"
	"strings"
	"testing"
)

// TestWaitParkedAlways runs the Wait tests on pollers opened after
// SetParkAlways(true) with two Ps, so that they park on the netpoller
// although another P is idle: timeouts, wakeups by the eventfd and by
// data, and no lost wakeup.
func TestWaitParkedAlways(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	SetParkAlways(true)
	defer SetParkAlways(false)
	parkFixtures = true
	defer func() { parkFixtures = false }()
	runWaitTests(t)
}

// TestSetParkAlwaysParks checks how a blocked Wait of a poller from
// NewWoken waits with two Ps: parked on the netpoller after
// SetParkAlways(true), in the system call after SetParkAlways(false).
func TestSetParkAlwaysParks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer SetParkAlways(false)
	for _, tc := range []struct {
		always bool
		state  string
	}{
		{true, "[IO wait"},
		{false, "[syscall"},
	} {
		SetParkAlways(tc.always)
		p, ev, err := NewWoken(-1)
		if err != nil {
			t.Fatal(err)
		}
		ch := waitAsync(p, -1)
		if got := waitState(t); !strings.HasPrefix(got, tc.state) {
			t.Errorf("SetParkAlways(%v): the waiting goroutine is %q, want %s...]", tc.always, got, tc.state)
		}
		ev.Signal()
		if r := expectResult(t, ch); r.n != 1 || r.evs[0].Fd != -1 {
			t.Fatalf("SetParkAlways(%v): %d %v %+v", tc.always, r.n, r.err, r.evs[0])
		}
		p.Close()
		ev.Close()
	}
}
