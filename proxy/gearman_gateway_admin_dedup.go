package proxy

import (
	"sync"

	"github.com/jobgate/jobgate/routing"
)

// gwOwnSessions is the set of a gateway's sessions that have registered a
// function (CAN_DO or CAN_DO_TIMEOUT) or opened an upstream session, for
// the merged admin listings. A worker whose function's pool has several
// backends is registered on each of them (consumers fan in), so every
// backend counts it, and each upstream lists the gateway's sessions on it
// among its "workers": only the gateway knows that those are its own.
//
// A session joins at its first CAN_DO or upstream session (once:
// gwSession.joined) and leaves when it closes. Lock order: gwSession.mu,
// then mu; snapshot's callers take the sessions' locks after it returns.
type gwOwnSessions struct {
	mu  sync.Mutex
	set map[*gwSession]struct{} // guarded by mu
}

// join adds s; the caller holds s.mu, so that a session that closed
// (Close sets closed, then leaves) is not added back.
func (o *gwOwnSessions) join(s *gwSession) {
	if s.closed || s.joined {
		return
	}
	s.joined = true
	o.mu.Lock()
	if o.set == nil {
		o.set = map[*gwSession]struct{}{}
	}
	o.set[s] = struct{}{}
	o.mu.Unlock()
}

// leave removes s; called when s closes, with no lock held.
func (o *gwOwnSessions) leave(s *gwSession) {
	o.mu.Lock()
	delete(o.set, s)
	o.mu.Unlock()
}

// snapshot returns the sessions in the set.
func (o *gwOwnSessions) snapshot() []*gwSession {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*gwSession, 0, len(o.set))
	for s := range o.set {
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
// not list it. Backends match by id and address (sameBackend): abilities
// registered before a reload hold the backends of the routing then.
func (o *gwOwnSessions) extraRegistrations(in []*routing.Backend) map[string]uint64 {
	var extra map[string]uint64
	for _, s := range o.snapshot() {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			continue
		}
		for fn, a := range s.abilities {
			k := uint64(0)
			for _, b := range a.backends {
				if containsBackend(in, b) && (b.ID == routing.LocalID || s.findLocked(b) != nil) {
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
func (gw *gwRouting) answeredSet(answered []bool) []*routing.Backend {
	in := make([]*routing.Backend, 0, len(answered)+1)
	if gw.local {
		in = append(in, gw.localBackend())
	}
	for i, ok := range answered {
		if ok {
			in = append(in, gw.routed[i])
		}
	}
	return in
}
