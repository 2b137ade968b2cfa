package epoll

import (
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parkFixtures makes newWaitFixture's poller park when alone.
var parkFixtures bool

// TestWaitParked runs the Wait tests on pollers that park, with one P, so
// that they park on the netpoller: timeouts, wakeups by the eventfd and by
// data, and no lost wakeup.
func TestWaitParked(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	parkFixtures = true
	defer func() { parkFixtures = false }()
	t.Run("Timeout", TestWaitTimeout)
	t.Run("WokenByEventFD", TestWaitWokenByEventFD)
	t.Run("EventsWhileBlocked", TestWaitEventsWhileBlocked)
	t.Run("ManyWakeups", TestWaitManyWakeups)
}

// TestParkWhenAloneParks checks how a blocked Wait waits: parked on the
// netpoller ("IO wait") after ParkWhenAlone with one P, in the system call
// after ParkWhenAlone with two or without ParkWhenAlone.
func TestParkWhenAloneParks(t *testing.T) {
	for _, tc := range []struct {
		park  bool
		procs int
		state string
	}{
		{true, 1, "[IO wait"},
		{true, 2, "[syscall"},
		{false, 1, "[syscall"},
	} {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			parkFixtures = tc.park
			defer func() { parkFixtures = false }()
			p, ev, _ := newWaitFixture(t)
			ch := waitAsync(p, -1)
			if got := waitState(t); !strings.HasPrefix(got, tc.state) {
				t.Errorf("park %v, GOMAXPROCS %d: the waiting goroutine is %q, want %s...]", tc.park, tc.procs, got, tc.state)
			}
			ev.Signal()
			if r := expectResult(t, ch); r.n != 1 || r.evs[0].Fd != -1 {
				t.Fatalf("park %v, GOMAXPROCS %d: %d %v %+v", tc.park, tc.procs, r.n, r.err, r.evs[0])
			}
		}()
	}
}

// waitState returns the state ("[IO wait]", "[syscall]", ...) of the
// goroutine blocked in Poller.Wait, once it is blocked.
func waitState(t *testing.T) string {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		buf = buf[:runtime.Stack(buf[:cap(buf)], true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if !strings.Contains(g, "epoll.(*Poller).Wait") {
				continue
			}
			head, _, _ := strings.Cut(g, "\n")
			// "goroutine 7 [IO wait]:"
			if i := strings.Index(head, "["); i >= 0 && !strings.HasPrefix(head[i:], "[running") && !strings.HasPrefix(head[i:], "[runnable") {
				return head[i:]
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no goroutine blocked in Wait")
	return ""
}

// TestParkedClose: Close after ParkWhenAlone (one P) closes the poller's
// descriptor and the duplicate the netpoller watched.
func TestParkedClose(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ParkWhenAlone(); err != nil {
		t.Fatal(err)
	}
	if p.park == nil {
		t.Fatal("ParkWhenAlone with one P did not park")
	}
	var dup int
	if err := p.park.rc.Control(func(fd uintptr) { dup = int(fd) }); err != nil {
		t.Fatal(err)
	}
	fd := p.fd
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{fd, dup} {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != syscall.EBADF {
			t.Fatalf("fstat of %d after Close: %v, want EBADF", fd, err)
		}
	}
}
