package epoll

import (
	"syscall"
	"testing"
	"time"
)

// newWaitFixture opens a poller with an eventfd (id -1) and a pipe's read
// end (id 3) registered; with parkFixtures, one that parks when alone.
func newWaitFixture(t *testing.T) (*Poller, *EventFD, [2]int) {
	t.Helper()
	p, ev, err := newWoken(-1, parkFixtures)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); ev.Close() })
	var pp [2]int
	if err := syscall.Pipe2(pp[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(pp[0]); syscall.Close(pp[1]) })
	if err := p.Add(pp[0], In, 3); err != nil {
		t.Fatal(err)
	}
	return p, ev, pp
}

// waitResult is what one Wait returned, and how long it took.
type waitResult struct {
	n   int
	err error
	evs [4]syscall.EpollEvent
	d   time.Duration
}

// waitAsync runs Wait(evs, msec) in a goroutine and returns its result
// channel. A signal (the runtime's preemption, often under -race) can end
// a blocked wait early with no events, as Wait documents; like an event
// loop, waitAsync then waits again for what is left of msec.
func waitAsync(p *Poller, msec int) chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		var r waitResult
		start := time.Now()
		left := msec
		for {
			r.n, r.err = p.Wait(r.evs[:], left)
			r.d = time.Since(start)
			if r.n != 0 || r.err != nil || msec == 0 {
				break
			}
			if msec > 0 {
				left = msec - int(r.d/time.Millisecond)
				if left <= 0 {
					break
				}
			}
		}
		ch <- r
	}()
	return ch
}

// expectBlocked fails if the wait has returned within a short while: it
// should still be blocked, nothing being ready.
func expectBlocked(t *testing.T, ch chan waitResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("wait returned with nothing ready: %d %v %+v", r.n, r.err, r.evs[0])
	case <-time.After(50 * time.Millisecond):
	}
}

// expectResult returns the wait's result, failing if it does not come.
func expectResult(t *testing.T, ch chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return")
	}
	panic("unreachable")
}

// runWaitTests runs the Wait tests as subtests, on the pollers the
// caller's settings (GOMAXPROCS, SetParkAlways, SetSpin) make.
func runWaitTests(t *testing.T) {
	t.Run("Timeout", TestWaitTimeout)
	t.Run("WokenByEventFD", TestWaitWokenByEventFD)
	t.Run("EventsWhileBlocked", TestWaitEventsWhileBlocked)
	t.Run("ManyWakeups", TestWaitManyWakeups)
}

// TestWaitTimeout: a finite wait with nothing ready returns no events
// after at least its timeout; a later unbounded wait is not cut short by
// that timeout.
func TestWaitTimeout(t *testing.T) {
	p, _, pp := newWaitFixture(t)
	r := expectResult(t, waitAsync(p, 30))
	if r.n != 0 || r.err != nil {
		t.Fatalf("timed-out wait: %d %v", r.n, r.err)
	}
	if r.d < 25*time.Millisecond {
		t.Fatalf("30 ms wait returned after %v", r.d)
	}
	ch := waitAsync(p, -1)
	expectBlocked(t, ch)
	syscall.Write(pp[1], []byte("x"))
	r = expectResult(t, ch)
	if r.n != 1 || r.err != nil || r.evs[0].Fd != 3 {
		t.Fatalf("unbounded wait: %d %v %+v", r.n, r.err, r.evs[0])
	}
}

// TestWaitWokenByEventFD: a wait blocked with nothing ready returns the
// eventfd's event when another goroutine signals it, and blocks again
// once drained.
func TestWaitWokenByEventFD(t *testing.T) {
	p, ev, _ := newWaitFixture(t)
	for i := 0; i < 3; i++ {
		ch := waitAsync(p, -1)
		expectBlocked(t, ch)
		ev.Signal()
		r := expectResult(t, ch)
		if r.n != 1 || r.err != nil || r.evs[0].Fd != -1 {
			t.Fatalf("round %d: %d %v %+v", i, r.n, r.err, r.evs[0])
		}
		ev.Drain()
	}
}

// TestWaitEventsWhileBlocked: data arriving on a watched descriptor while
// the wait is blocked (bounded or not) ends it with that event; events
// left unread stay ready (level-triggered) for the next wait.
func TestWaitEventsWhileBlocked(t *testing.T) {
	p, _, pp := newWaitFixture(t)
	for _, msec := range []int{-1, 10000} {
		ch := waitAsync(p, msec)
		expectBlocked(t, ch)
		syscall.Write(pp[1], []byte("x"))
		r := expectResult(t, ch)
		if r.n != 1 || r.err != nil || r.evs[0].Fd != 3 || r.evs[0].Events&In == 0 {
			t.Fatalf("msec %d: %d %v %+v", msec, r.n, r.err, r.evs[0])
		}
		// Not read yet: still ready.
		r = expectResult(t, waitAsync(p, -1))
		if r.n != 1 || r.evs[0].Fd != 3 {
			t.Fatalf("msec %d, unread data: %d %v %+v", msec, r.n, r.err, r.evs[0])
		}
		var b [8]byte
		syscall.Read(pp[0], b[:])
	}
}

// TestWaitManyWakeups races signals against waits: no wakeup may be lost
// between a wait finding nothing and blocking.
func TestWaitManyWakeups(t *testing.T) {
	p, ev, _ := newWaitFixture(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var evs [4]syscall.EpollEvent
		for got := 0; got < 2000; {
			n, err := p.Wait(evs[:], -1)
			if err != nil {
				t.Error(err)
				return
			}
			for _, e := range evs[:n] {
				if e.Fd == -1 {
					ev.Drain()
					got++
				}
			}
		}
	}()
	// One signal at a time, each after the last was consumed, so a lost
	// wakeup leaves the loop blocked and the test times out.
	for i := 0; i < 2000; i++ {
		ev.Signal()
		deadline := time.Now().Add(5 * time.Second)
		for eventfdPending(t, ev) {
			if time.Now().After(deadline) {
				t.Fatalf("wakeup %d lost", i)
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not finish")
	}
}

// eventfdPending reports whether ev's counter is non-zero, without
// changing it.
func eventfdPending(t *testing.T, ev *EventFD) bool {
	t.Helper()
	q, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(q)
	if err := syscall.EpollCtl(q, syscall.EPOLL_CTL_ADD, ev.FD(), &syscall.EpollEvent{Events: In}); err != nil {
		t.Fatal(err)
	}
	var evs [1]syscall.EpollEvent
	n, _ := syscall.EpollWait(q, evs[:], 0)
	return n > 0
}
