package epoll

import (
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitSpinning runs the Wait tests on pollers opened after SetSpin
// with two Ps: timeouts, wakeups by the eventfd and by data while the
// loop spins or after it has given up and blocked, and no lost wakeup.
func TestWaitSpinning(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	SetSpin(2 * time.Millisecond)
	defer SetSpin(0)
	runWaitTests(t)
}

// spinningFixture is newWaitFixture opened with two Ps (kept until the
// test ends) after SetSpin(d); open leaves its gate open, for tests of
// the spin itself rather than of when it happens.
func spinningFixture(t *testing.T, d time.Duration, open bool) (*Poller, *EventFD, [2]int) {
	t.Helper()
	prev := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	SetSpin(d)
	defer SetSpin(0)
	p, ev, pp := newWaitFixture(t)
	if open {
		p.gate = spinGate{}
	}
	return p, ev, pp
}

// TestSpinCatches: data that comes while a wait spins is returned by the
// spin, which never blocks in the system call.
func TestSpinCatches(t *testing.T) {
	p, _, pp := spinningFixture(t, time.Hour, true)
	ch := waitAsync(p, -1)
	waitSpinning(t)
	syscall.Write(pp[1], []byte("x"))
	r := expectResult(t, ch)
	if r.n != 1 || r.err != nil || r.evs[0].Fd != 3 {
		t.Fatalf("spinning wait: %d %v %+v", r.n, r.err, r.evs[0])
	}
	if p.spun.caught != 1 || p.spun.missed != 0 {
		t.Fatalf("spins caught %d, missed %d; want 1, 0", p.spun.caught, p.spun.missed)
	}
}

// TestSpinGivesUp: with nothing ready a wait spins for its budget, then
// blocks in the system call, where an event still wakes it.
func TestSpinGivesUp(t *testing.T) {
	p, ev, _ := spinningFixture(t, time.Millisecond, true)
	ch := waitAsync(p, -1)
	if got := waitState(t); !strings.HasPrefix(got, "[syscall") {
		t.Fatalf("after its spin the waiting goroutine is %q, want [syscall...]", got)
	}
	ev.Signal()
	r := expectResult(t, ch)
	if r.n != 1 || r.err != nil || r.evs[0].Fd != -1 {
		t.Fatalf("blocked wait: %d %v %+v", r.n, r.err, r.evs[0])
	}
	if p.spun.missed == 0 {
		t.Fatal("no spin ended with nothing ready")
	}
}

// TestSpinWithinTimeout: a wait shorter than the spin budget spins no
// longer than the wait, and returns nothing when it ends.
func TestSpinWithinTimeout(t *testing.T) {
	p, _, _ := spinningFixture(t, time.Hour, true)
	r := expectResult(t, waitAsync(p, 30))
	if r.n != 0 || r.err != nil {
		t.Fatalf("timed-out spinning wait: %d %v", r.n, r.err)
	}
	if r.d < 25*time.Millisecond {
		t.Fatalf("30 ms wait returned after %v", r.d)
	}
	if p.spun.missed == 0 {
		t.Fatal("the wait did not spin")
	}
}

// TestSpinGate: a gate opens once its blocking waits have brought about
// one event each, closes when one brings several, ignores timeouts, and
// keeps every spinGateProbe-th wait from spinning even when open.
func TestSpinGate(t *testing.T) {
	g := closedSpinGate()
	if g.open() {
		t.Fatal("a new gate is open")
	}
	for range 12 {
		g.observe(1)
	}
	if g.avg >= spinGateBelow {
		t.Fatalf("after 12 single events the average is %d, want under %d", g.avg, spinGateBelow)
	}
	g.waits = 0
	for i := 1; i <= 2*spinGateProbe; i++ {
		if got, want := g.open(), i%spinGateProbe != 0; got != want {
			t.Fatalf("wait %d: open %v, want %v", i, got, want)
		}
	}
	before := g.avg
	g.observe(0)
	if g.avg != before {
		t.Fatalf("a timed-out wait moved the average from %d to %d", before, g.avg)
	}
	g.observe(4)
	if g.open() {
		t.Fatalf("open after a wait of 4 events (average %d)", g.avg)
	}
	g.observe(1000)
	if g.avg > spinGateMax*spinGateOne {
		t.Fatalf("average %d above the cap", g.avg)
	}
}

// TestSpinOnlyForSingleEvents: a new poller does not spin; once its
// blocking waits have each brought one event it does, except for the
// gate's probes, which block. (How several events close the gate:
// TestSpinGate.)
func TestSpinOnlyForSingleEvents(t *testing.T) {
	p, ev, pp := spinningFixture(t, time.Second, false)
	var b [8]byte
	blockedThen := func(write func()) waitResult {
		ch := waitAsync(p, -1)
		if got := waitState(t); !strings.HasPrefix(got, "[syscall") {
			t.Fatalf("the waiting goroutine is %q, want [syscall...]", got)
		}
		write()
		return expectResult(t, ch)
	}
	one := func() { syscall.Write(pp[1], []byte("x")) }
	for i := 0; p.gate.avg >= spinGateBelow; i++ {
		if i == 20 {
			t.Fatalf("20 single-event waits left the average at %d", p.gate.avg)
		}
		if r := blockedThen(one); r.n != 1 {
			t.Fatalf("blocked wait: %d events", r.n)
		}
		syscall.Read(pp[0], b[:])
	}
	if p.spun.caught+p.spun.missed != 0 {
		t.Fatalf("spun before the gate opened: %+v", p.spun)
	}
	p.gate.waits = 0 // the next wait is not a probe
	ch := waitAsync(p, -1)
	waitSpinning(t)
	one()
	if r := expectResult(t, ch); r.n != 1 || p.spun.caught != 1 {
		t.Fatalf("open gate: %d events, spins %+v", r.n, p.spun)
	}
	syscall.Read(pp[0], b[:])
	// The gate's probe blocks although the gate is open, and is not a spin.
	p.gate.waits = spinGateProbe - 1
	if r := blockedThen(func() { ev.Signal() }); r.n != 1 || p.spun.caught+p.spun.missed != 1 {
		t.Fatalf("probe: %d events, spins %+v", r.n, p.spun)
	}
}

// TestSpinSetting: a poller takes SetSpin's duration when it opens, only
// with more than one P, and keeps it; a negative duration is none.
func TestSpinSetting(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer SetSpin(0)
	for _, tc := range []struct {
		set   time.Duration
		procs int
		want  time.Duration
	}{
		{0, 2, 0},
		{30 * time.Microsecond, 2, 30 * time.Microsecond},
		{30 * time.Microsecond, 1, 0},
		{-time.Second, 2, 0},
	} {
		runtime.GOMAXPROCS(tc.procs)
		SetSpin(tc.set)
		p, ev, err := newWoken(-1, false)
		if err != nil {
			t.Fatal(err)
		}
		SetSpin(time.Second) // later settings leave an open poller alone
		if p.spinDur != tc.want {
			t.Errorf("SetSpin(%v) with %d P: poller spins %v, want %v", tc.set, tc.procs, p.spinDur, tc.want)
		}
		p.Close()
		ev.Close()
	}
}

// TestSpinBudget: a wait spins for the poller's spin, cut to the wait's
// own timeout when that is shorter.
func TestSpinBudget(t *testing.T) {
	for _, tc := range []struct {
		spin time.Duration
		msec int
		want time.Duration
	}{
		{30 * time.Microsecond, -1, 30 * time.Microsecond},
		{30 * time.Microsecond, 5, 30 * time.Microsecond},
		{10 * time.Millisecond, 5, 5 * time.Millisecond},
		{10 * time.Millisecond, -1, 10 * time.Millisecond},
	} {
		p := &Poller{spinDur: tc.spin}
		if got := p.spinBudget(tc.msec); got != tc.want {
			t.Errorf("spin %v, wait %d ms: budget %v, want %v", tc.spin, tc.msec, got, tc.want)
		}
	}
}

// waitSpinning returns once a goroutine is spinning in Poller.Wait.
func waitSpinning(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		buf = buf[:runtime.Stack(buf[:cap(buf)], true)]
		if strings.Contains(string(buf), "epoll.(*Poller).spin(") {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no goroutine spinning in Wait")
}
