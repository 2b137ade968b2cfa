package beanstalk

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// TestRandomOperations drives sessions with random commands, time steps,
// cancels and closes, and checks the engine's invariants after each step.
func TestRandomOperations(t *testing.T) {
	seeds := uint64(64)
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, seed) })
	}
}

func randomRun(t *testing.T, seed uint64) {
	e, fc := newTestEngine(t)
	rng := rand.New(rand.NewPCG(seed, 99))
	tubes := [][]byte{[]byte("default"), []byte("a"), []byte("b")}
	sessions := make([]*Session, 4)
	pending := make([]bool, len(sessions))
	for i := range sessions {
		sessions[i] = e.NewSession(nil)
	}
	var maxID uint64
	randID := func() uint64 { return uint64(rng.IntN(int(maxID)+2)) + 1 }
	for step := range 2000 {
		i := rng.IntN(len(sessions))
		s := sessions[i]
		var r wire.Reply
		if pending[i] {
			switch rng.IntN(4) {
			case 0:
				s.Cancel()
				s.Result(&r)
				pending[i] = false
			case 1:
				s.Close()
				sessions[i] = e.NewSession(nil)
				pending[i] = false
			default:
				pending[i] = !s.Result(&r)
			}
		} else {
			var cmd wire.Command
			switch rng.IntN(16) {
			case 0, 1, 2:
				cmd = wire.Command{Verb: wire.Put, Pri: uint32(rng.IntN(2000)), Delay: uint32(rng.IntN(3) * rng.IntN(5)), TTR: uint32(rng.IntN(4)), Body: []byte("x")}
			case 3:
				cmd = wire.Command{Verb: wire.ReserveWithTimeout, Timeout: uint32(rng.IntN(3))}
			case 4:
				cmd = wire.Command{Verb: wire.Reserve}
			case 5:
				cmd = wire.Command{Verb: wire.Delete, ID: randID()}
			case 6:
				cmd = wire.Command{Verb: wire.Release, ID: randID(), Pri: uint32(rng.IntN(2000)), Delay: uint32(rng.IntN(3))}
			case 7:
				cmd = wire.Command{Verb: wire.Bury, ID: randID(), Pri: uint32(rng.IntN(2000))}
			case 8:
				cmd = wire.Command{Verb: wire.Kick, Bound: uint32(rng.IntN(4))}
			case 9:
				cmd = wire.Command{Verb: wire.KickJob, ID: randID()}
			case 10:
				cmd = wire.Command{Verb: wire.Touch, ID: randID()}
			case 11:
				cmd = wire.Command{Verb: wire.Use, Tube: tubes[rng.IntN(len(tubes))]}
			case 12:
				cmd = wire.Command{Verb: wire.Watch, Tube: tubes[rng.IntN(len(tubes))]}
			case 13:
				cmd = wire.Command{Verb: wire.Ignore, Tube: tubes[rng.IntN(len(tubes))]}
			case 14:
				cmd = wire.Command{Verb: wire.PauseTube, Tube: tubes[rng.IntN(len(tubes))], Delay: uint32(rng.IntN(3))}
			case 15:
				cmd = wire.Command{Verb: wire.ReserveJob, ID: randID()}
			}
			pending[i] = !s.Exec(&cmd, &r)
			if r.Kind == wire.Inserted {
				maxID = r.ID
			}
		}
		if rng.IntN(8) == 0 {
			fc.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
		}
		if err := checkInvariants(e, sessions); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	for _, s := range sessions {
		s.Close()
	}
	if err := checkInvariants(e, nil); err != nil {
		t.Fatalf("after close: %v", err)
	}
	if e.st.reserved != 0 || e.st.waiting != 0 || e.st.conns != 0 {
		t.Fatalf("after close: %+v", e.st)
	}
}

// checkInvariants walks the engine's structures and checks that every job
// is where its state says, that the counters agree with the containers,
// and that no unpaused tube has both waiters and ready jobs.
func checkInvariants(e *Engine, sessions []*Session) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	var ready, delayed, buried, reserved, urgent uint64
	jobs := 0
	refs := map[*tube]int{e.defaultTube: 1}
	checkHeap := func(h *jobHeap, state uint8, tb *tube) error {
		for i, j := range h.a {
			if j.state != state || int(j.idx) != i || (tb != nil && j.tube != tb) {
				return fmt.Errorf("job %d: state %d idx %d in heap of state %d at %d", j.id, j.state, j.idx, state, i)
			}
			if i > 0 && h.less(j, h.a[(i-1)/2]) {
				return fmt.Errorf("heap order broken at job %d", j.id)
			}
			if e.jobs.get(j.id) != j {
				return fmt.Errorf("job %d not in the table", j.id)
			}
			refs[j.tube]++
			jobs++
		}
		return nil
	}
	for i, tb := range e.tubeList {
		if tb.listIdx != i || e.tubes[tb.name] != tb {
			return fmt.Errorf("tube %s misplaced", tb.name)
		}
		for _, c := range []struct {
			h     *jobHeap
			state uint8
		}{{&tb.ready, stateReady}, {&tb.delay, stateDelayed}, {&tb.buried, stateBuried}} {
			if err := checkHeap(c.h, c.state, tb); err != nil {
				return fmt.Errorf("tube %s: %v", tb.name, err)
			}
		}
		ready += uint64(tb.ready.len())
		delayed += uint64(tb.delay.len())
		buried += uint64(tb.buried.len())
		for _, j := range tb.ready.a {
			if j.pri < urgentThreshold {
				urgent++
			}
		}
		if tb.waiters.len() > 0 && tb.ready.len() > 0 && !tb.pausedAt(now) {
			return fmt.Errorf("tube %s has %d waiters and %d ready jobs", tb.name, tb.waiters.len(), tb.ready.len())
		}
		if j := tb.delay.top(); j != nil && (tb.timerIdx < 0 || tb.nextAt > j.deadline) {
			return fmt.Errorf("tube %s: delayed job %d not timed", tb.name, j.id)
		}
	}
	waiting := 0
	inList := map[*tube]map[*Session]bool{}
	for _, tb := range e.tubeList {
		inList[tb] = map[*Session]bool{}
		for i, w := range tb.waiters.items {
			if w.idx != i {
				return fmt.Errorf("tube %s: waiter at %d thinks it is at %d", tb.name, i, w.idx)
			}
			inList[tb][w.s] = true
		}
	}
	for _, s := range sessions {
		if s.closed {
			continue
		}
		for _, tb := range s.watch {
			if inList[tb][s] != s.waiting {
				return fmt.Errorf("tube %s: session waiting=%v but listed=%v", tb.name, s.waiting, inList[tb][s])
			}
		}
		if err := checkHeap(&s.reserved, stateReserved, nil); err != nil {
			return fmt.Errorf("session: %v", err)
		}
		reserved += uint64(s.reserved.len())
		if s.waiting {
			waiting++
		}
		refs[s.use]++
		for _, tb := range s.watch {
			refs[tb]++
		}
		if j := s.reserved.top(); j != nil && (s.timerIdx < 0 || s.tickAt > j.deadline) {
			return fmt.Errorf("reservation of job %d not timed", j.id)
		}
	}
	st := e.st
	if st.ready != ready || st.delayed != delayed || st.buried != buried || st.urgent != urgent {
		return fmt.Errorf("counters %+v, containers ready %d delayed %d buried %d urgent %d", st, ready, delayed, buried, urgent)
	}
	if sessions != nil && (st.reserved != reserved || st.waiting != waiting) {
		return fmt.Errorf("reserved %d/%d waiting %d/%d", st.reserved, reserved, st.waiting, waiting)
	}
	if sessions != nil {
		for _, tb := range e.tubeList {
			if tb.refs != refs[tb] {
				return fmt.Errorf("tube %s: refs %d, counted %d", tb.name, tb.refs, refs[tb])
			}
		}
	}
	n := len(e.jobs.overflow)
	for _, p := range e.jobs.pages {
		n += p.live
	}
	if sessions != nil && n != jobs {
		return fmt.Errorf("table holds %d jobs, containers %d", n, jobs)
	}
	return nil
}
