package proxy

import (
	"sync"

	"github.com/jobgate/jobgate/routing"
)

// gwWorkers is the set of a gateway's sessions that have registered a
// function (CAN_DO or CAN_DO_TIMEOUT) or opened an upstream session, for
// the merged admin listings. A worker whose function's pool has several
// backends is registered on each of them (consumers fan in), so every
// backend counts it, and each upstream lists the gateway's sessions on it
// among its "workers": only the gateway knows that those are its own.
//
// A session joins at its first CAN_DO or upstream session and leaves when
// it closes. Lock order: gwSession.mu, then mu; snapshot's callers take
// the sessions' locks after it returns.
type gwWorkers struct {
	mu  sync.Mutex
	set map[*gwSession]struct{} // guarded by mu
}

// join adds s; the caller holds s.mu, so that a session that closed
// (Close sets closed, then leaves) is not added back.
func (w *gwWorkers) join(s *gwSession) {
	if s.closed {
		return
	}
	w.mu.Lock()
	if w.set == nil {
		w.set = map[*gwSession]struct{}{}
	}
	w.set[s] = struct{}{}
	w.mu.Unlock()
}

// leave removes s; called when s closes, with no lock held.
func (w *gwWorkers) leave(s *gwSession) {
	w.mu.Lock()
	delete(w.set, s)
	w.mu.Unlock()
}

// snapshot returns the sessions in the set.
func (w *gwWorkers) snapshot() []*gwSession {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*gwSession, 0, len(w.set))
	for s := range w.set {
		out = append(out, s)
	}
	return out
}

// extraRegistrations returns, per function, how many registrations of the
// gateway's own worker sessions the backends in counted beyond one per
// session: what the summed worker column of "status" and "prioritystatus"
// over those backends counts twice. A registration is counted where the
// function's pool has the backend and the session is open there (the
// local engine's always is): a backend the session could not reach does
// not list it.
func (w *gwWorkers) extraRegistrations(in map[*routing.Backend]bool) map[string]uint64 {
	var extra map[string]uint64
	for _, s := range w.snapshot() {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			continue
		}
		for fn, a := range s.abilities {
			k := uint64(0)
			for _, b := range a.backends {
				if in[b] && (b.ID == routing.LocalID || s.findLocked(b) != nil) {
					k++
				}
			}
			if k > 1 {
				if extra == nil {
					extra = map[string]uint64{}
				}
				extra[fn] += k - 1
			}
		}
		s.mu.Unlock()
	}
	return extra
}

// answeredSet is the backends whose listings a merge holds: the local
// engine when routed to, and each routed upstream whose answered entry
// (by index in routed) is true.
func (gw *gwRouting) answeredSet(answered []bool) map[*routing.Backend]bool {
	in := make(map[*routing.Backend]bool, len(answered)+1)
	if gw.local {
		in[gw.localBackend()] = true
	}
	for i, ok := range answered {
		if ok {
			in[gw.routed[i]] = true
		}
	}
	return in
}
