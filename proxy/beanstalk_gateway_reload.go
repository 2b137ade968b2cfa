package proxy

import (
	"errors"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/routing"
)

// PrepareReload builds the Beanstalk routing of c (routes.beanstalk,
// routes.beanstalk_default, pools, backends) and returns the function that
// puts it in force. Every command a client sends after it is routed by
// the new configuration, on open connections too; a command already
// running (a waiting reserve) finishes on the routing it began with.
// Backends whose configuration did not change are kept as they are, with
// the connections' sessions to them (used tube, watch list, reservations),
// their breaker and health checker; a new or changed backend starts
// afresh (its checker starts when applied), and the checkers of backends
// gone are stopped. Ids naming a kept backend still decode when no route
// reaches it any more, so a client finishes the jobs it holds there (its
// delete, release, bury, touch go to it as before). A connection keeps its
// sessions to a backend the new configuration drops or changes until it
// closes, but ids naming a dropped backend no longer decode: commands on
// them answer NOT_FOUND, and the jobs it holds there return to ready at
// their TTR or when it closes.
//
// A server started without upstream backends serves connections on the
// direct engine path; it cannot become a gateway live, so a configuration
// that adds Beanstalk upstreams to it is refused (restart). A gateway
// whose new configuration has no upstream left routes every tube to the
// local engine. On Linux a gateway whose connections the event loop
// serves cannot get a TLS upstream that a route reaches (or whose ids
// still decode), whose writes could block the loop: restart. It returns an error and changes
// nothing when c cannot be built.
func (s *BeanstalkServer) PrepareReload(c *config.Config, m *metrics.Metrics) (apply func(), err error) {
	if s.gw == nil {
		if err := refuseNewUpstreams(c, config.TypeBeanstalk); err != nil {
			return nil, err
		}
		return func() {}, nil
	}
	old := s.gw.rt()
	g, err := buildBeanstalkGateway(c, m, old.cfg.built)
	if err != nil {
		return nil, err
	}
	if g == nil {
		if g, err = localOnlyGateway(); err != nil {
			return nil, err
		}
	}
	rt, err := newBgwRouting(g)
	if err != nil {
		return nil, err
	}
	if !rt.loopable() && s.gatewayLooping() {
		return nil, errors.New("beanstalk gateway: a TLS upstream cannot join a gateway served by the event loop; restart to add it")
	}
	return func() {
		s.gw.cur.Store(rt)
		swapHealth(old.cfg.health, rt.cfg.health)
	}, nil
}

// localOnlyGateway routes every tube to the local engine, with its ids
// unchanged.
func localOnlyGateway() (*BeanstalkGateway, error) {
	local := &routing.Backend{ID: routing.LocalID, Name: config.LocalName}
	p, err := routing.NewPool(config.LocalName, routing.Single, local)
	if err != nil {
		return nil, err
	}
	rules, err := routing.NewRules(nil, p)
	if err != nil {
		return nil, err
	}
	ids, err := routing.NewIDMap([]*routing.Backend{local})
	if err != nil {
		return nil, err
	}
	return &BeanstalkGateway{Rules: rules, IDs: ids}, nil
}

// RoutesReady returns nil when every Beanstalk route in force (each rule
// and the default) has at least one backend available, and otherwise
// names those that have none: a /readyz check. A server on the direct
// path has only its engine and is always ready.
func (s *BeanstalkServer) RoutesReady() error {
	if s.gw == nil {
		return nil
	}
	return routesDown(config.TypeBeanstalk, s.gw.rt().cfg.Rules)
}
