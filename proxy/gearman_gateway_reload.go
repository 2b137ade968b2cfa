package proxy

import (
	"errors"
	"reflect"
	"slices"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/routing"
)

// builtBackend is a backend NewGearmanGatewayFromConfig made, with the
// configuration it was made from.
type builtBackend struct {
	cfg config.Backend
	b   *routing.Backend
}

// reuseBackend returns prev's backend for cb when its configuration is
// unchanged. Keeping the same *routing.Backend keeps the connections'
// sessions to it, its breaker and its health checker, so jobs in flight
// there finish as if nothing happened.
func reuseBackend(prev map[string]builtBackend, cb config.Backend) *routing.Backend {
	old, ok := prev[cb.Name]
	if !ok || !reflect.DeepEqual(old.cfg, cb) {
		return nil
	}
	return old.b
}

// PrepareReload builds the Gearman routing of c (routes.gearman,
// routes.gearman_default, pools, backends) and returns the function that
// puts it in force at once, for every request after it, on open
// connections too. Backends whose configuration did not change are kept
// as they are; a new or changed backend starts afresh (its health checker
// starts when applied), and the checkers of backends gone are stopped.
// Handles of jobs on a backend the new configuration drops no longer
// decode: their WORK_* and GET_STATUS are answered as for an unknown job.
//
// A server started without upstream backends serves connections without
// a gateway (on the event loop); it cannot become a gateway live, so a
// configuration that adds upstream backends to it is refused (restart).
// It returns an error and changes nothing when c cannot be built.
func (s *GearmanServer) PrepareReload(c *config.Config, m *metrics.Metrics) (apply func(), err error) {
	if s.gw == nil {
		if err := refuseNewUpstreams(c, config.TypeGearman); err != nil {
			return nil, err
		}
		return func() {}, nil
	}
	old := s.gw.rt()
	g, err := buildGearmanGateway(c, m, old.cfg.built)
	if err != nil {
		return nil, err
	}
	g.AdminTimeout, g.DialTimeout = old.cfg.AdminTimeout, old.cfg.DialTimeout
	rt, err := newGwRouting(g)
	if err != nil {
		return nil, err
	}
	if !rt.loopable() && s.loop.Load() != nil {
		// Its writes could block the event loop (gearman_gateway_loop.go).
		// Before Serve, the loop does not start for such a routing; a
		// Serve racing this reload gets loop connections that refuse the
		// TLS backend (openConn).
		return nil, errors.New("gearman gateway: a TLS upstream cannot join a gateway served by the event loop; restart to add it")
	}
	return func() {
		s.gw.cur.Store(rt)
		swapHealth(old.cfg.health, rt.cfg.health)
		s.gw.lines.retire(func(b *routing.Backend) bool { return slices.Contains(rt.routed, b) }, gwLineRetireGrace(old))
	}, nil
}

// RoutesReady returns nil when every route of the routing in force (each
// rule and the default) has at least one backend available (breaker not
// open, health check up), and otherwise names the routes that have none:
// a /readyz check. A plain server has only its engine and is always ready.
func (s *GearmanServer) RoutesReady() error {
	if s.gw == nil {
		return nil
	}
	return routesDown(config.TypeGearman, s.gw.rt().cfg.Rules)
}
