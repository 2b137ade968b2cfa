package proxy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/routing"
)

// This file holds what a reload does alike for both protocols. The
// Beanstalk server uses it; gearman_gateway_reload.go still has its own
// copy of the same steps.

// refuseNewUpstreams is a direct-path server's reload check: it cannot
// become a gateway live, so a c naming an upstream backend of protocol
// (config.TypeGearman, config.TypeBeanstalk) is refused.
func refuseNewUpstreams(c *config.Config, protocol string) error {
	for _, b := range c.AllBackends() {
		if b.Type == protocol && b.Name != config.LocalName {
			return errors.New(protocol + ": this server was started without upstream backends; adding them needs a restart")
		}
	}
	return nil
}

// swapHealth starts the health checkers of next that old did not run and
// stops those of old that next dropped; kept ones run on undisturbed.
func swapHealth(old, next []*routing.Health) {
	running := map[*routing.Health]bool{}
	for _, h := range old {
		running[h] = true
	}
	for _, h := range next {
		if !running[h] {
			h.Start()
		}
		delete(running, h)
	}
	for h := range running {
		h.Stop()
	}
}

// routesDown returns nil when every route of rules (each rule and the
// default) has at least one backend available (breaker not open, health
// check up), and otherwise names the route targets that have none.
func routesDown(protocol string, rules *routing.Rules) error {
	var down []string
	seen := map[*routing.Pool]bool{}
	check := func(p *routing.Pool) {
		if p == nil || seen[p] {
			return
		}
		seen[p] = true
		for _, b := range p.Backends() {
			if b.Available() {
				return
			}
		}
		down = append(down, p.Name())
	}
	for _, r := range rules.Rules() {
		check(r.Pool)
	}
	check(rules.Default())
	if len(down) > 0 {
		return fmt.Errorf("no backend up for %s route target %s", protocol, strings.Join(down, ", "))
	}
	return nil
}
