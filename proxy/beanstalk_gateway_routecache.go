package proxy

import (
	"slices"

	"github.com/jobgate/jobgate/routing"
)

// Per-session route caches for the commands the event loop forwards most
// (issue 6): a reserve's candidate backends and whether a backend session
// already watches what the client's watch list asks of it. Both depend on
// the watch list, the reserve filter and the routing only, so they are
// rebuilt when one of those changes (watchGen, s.rt) instead of matching
// every watched tube's rules on every reserve. Availability (breaker,
// health) changes by itself and is still asked each time. An auth
// filter's answers change with the connection's token and the policy
// without a watchChanged; only the loop uses these caches, and it runs no
// command of a connection with auth (loopCan).

// bgwWatchCache is a bgwSession's cache; the session's goroutine (the
// loop, or the one running its command) owns it.
type bgwWatchCache struct {
	// gen counts changes of the watch list and of the reserve filter;
	// it starts at 1 so that a zero stamp is never current.
	gen uint64
	// The backends serving the consumable watched tubes' pools, each
	// once, as of resvGen and resvRT.
	resv    []*routing.Backend
	resvGen uint64
	resvRT  *bgwRouting
}

// watchChanged marks the watch list or the reserve filter as changed.
func (s *bgwSession) watchChanged() { s.wc.gen++ }

// reserveBackends returns the backends a reserve may target before
// availability: those serving a consumable watched tube's pool, each once.
func (s *bgwSession) reserveBackends() []*routing.Backend {
	c := &s.wc
	if c.resvGen == c.gen && c.resvRT == s.rt {
		return c.resv
	}
	c.resv = c.resv[:0]
	for _, t := range s.watched {
		if !s.consumable(t) {
			continue
		}
		p := s.rt.cfg.Rules.Match(t)
		if p == nil {
			continue
		}
		for _, b := range p.Backends() {
			if serves(b) && !slices.Contains(c.resv, b) {
				c.resv = append(c.resv, b)
			}
		}
	}
	c.resvGen, c.resvRT = c.gen, s.rt
	return c.resv
}

// syncWatchCached is syncWatch with no held answer, skipped when be was
// synced for the same watch list, filter and routing: syncWatch then
// finds nothing to send.
func (s *bgwSession) syncWatchCached(be *bgwBackend) {
	if be.syncGen == s.wc.gen && be.syncRT == s.rt {
		return
	}
	s.syncWatch(be, nil)
	be.syncGen, be.syncRT = s.wc.gen, s.rt
}
