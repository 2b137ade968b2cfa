package main

import (
	"context"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/proxy/auth"
)

// reloadableServer is what the Gearman and Beanstalk servers offer a
// reload: both take routing, limits and auth the same way.
type reloadableServer interface {
	PrepareReload(c *config.Config, m *metrics.Metrics) (apply func(), err error)
	SetLimits(l proxy.Limits)
	SetAuthPolicy(p *auth.Policy)
}

// prepareServerReload checks cfg's routing and auth policy for srv before
// anything changes, so a bad file leaves the old settings whole; the
// returned apply takes the new limits, policy and routes.
func prepareServerReload(srv reloadableServer, cfg *config.Config, m *metrics.Metrics) (func(), error) {
	routes, err := srv.PrepareReload(cfg, m)
	if err != nil {
		return nil, err
	}
	pol, err := authPolicy(cfg)
	if err != nil {
		return nil, err
	}
	l := limitsFrom(cfg.Limits)
	return func() {
		srv.SetLimits(l)
		srv.SetAuthPolicy(pol)
		routes()
	}, nil
}

// serverReadyChecks are a protocol service's /readyz checks: its routes
// have a backend up, and its journal (j, nil without persistence) is
// replayed and writable.
func serverReadyChecks(protocol string, routesReady func() error, j *journal.Journal) []readyCheck {
	checks := []readyCheck{{protocol + " routes have a backend up", func(context.Context) error { return routesReady() }}}
	if j != nil {
		checks = append(checks, readyCheck{protocol + " journal replayed and writable", journalCheck(j)})
	}
	return checks
}
