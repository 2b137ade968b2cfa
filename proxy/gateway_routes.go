package proxy

import (
	"context"
	"fmt"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy/tlsconf"
	"github.com/jobgate/jobgate/routing"
	"github.com/jobgate/jobgate/routing/upstream"
)

// This file holds the parts of a gateway's build that do not depend on the
// protocol: a backend's breaker and health check, and the rules and pools
// of its routes. Both gateways build with it.

// upstreamConfig is how to reach the upstream backend cb: address,
// timeouts, keepalive and TLS.
func upstreamConfig(cb config.Backend) (upstream.Config, error) {
	uc := upstream.Config{Addr: cb.Address, DialTimeout: cb.DialTimeout,
		IOTimeout: cb.IOTimeout, KeepAlive: cb.Keepalive}
	if cb.TLS.Enabled {
		tc, err := tlsconf.ClientConfig(cb.TLS, cb.Address)
		if err != nil {
			return uc, fmt.Errorf("%s backend %q: %w", cb.Type, cb.Name, err)
		}
		uc.TLS = tc
	}
	return uc, nil
}

// guardBackend gives b the breaker and health check cb configures, their
// state reported to m (nil: not reported); probe checks the upstream once.
// It returns b's health check, nil when cb sets none.
func guardBackend(b *routing.Backend, cb config.Backend, probe func(context.Context) error, m *metrics.Metrics) (*routing.Health, error) {
	// The hooks are resolved once per backend here; they are cheap and
	// lock-free, as routing requires of them.
	var onBreaker func(string, routing.BreakerState, routing.BreakerState)
	var onHealth func(bool)
	if m != nil {
		bs := m.Backend(cb.Name)
		onBreaker = func(_ string, _, to routing.BreakerState) { bs.SetBreakerState(uint8(to)) }
		onHealth = bs.SetUp
	}
	var err error
	if cb.Breaker.Failures > 0 {
		b.Breaker, err = routing.NewBreaker(routing.BreakerConfig{Name: cb.Name,
			Failures: cb.Breaker.Failures, OpenTimeout: cb.Breaker.OpenTimeout,
			HalfOpenRequests: cb.Breaker.HalfOpenRequests, OnStateChange: onBreaker})
		if err != nil {
			return nil, err
		}
	}
	if cb.HealthInterval > 0 {
		b.Health, err = routing.NewHealth(routing.HealthConfig{Probe: probe, Interval: cb.HealthInterval, OnChange: onHealth})
		if err != nil {
			return nil, err
		}
	}
	return b.Health, nil
}

// routeRules builds the rules of one protocol's routes and its default
// target def over the backends byName that serve it; protocol
// ("gearman", "beanstalk") names the configuration paths in errors. It
// returns the pools the rules lead to as well, by name.
func routeRules(c *config.Config, protocol string, routes []config.Route, def string, byName map[string]*routing.Backend) (*routing.Rules, map[string]*routing.Pool, error) {
	pools := map[string]*routing.Pool{}
	target := func(name string) (*routing.Pool, error) {
		if p := pools[name]; p != nil {
			return p, nil
		}
		var p *routing.Pool
		var err error
		if b := byName[name]; b != nil {
			p, err = routing.NewPool(name, routing.Single, b)
		} else if cp, ok := c.Pool(name); ok {
			kind := map[string]routing.PoolKind{config.StrategySingle: routing.Single,
				config.StrategyShard: routing.Shard, config.StrategyFailover: routing.Failover}[cp.Strategy]
			var members []*routing.Backend
			for _, m := range cp.Backends {
				if b := byName[m]; b != nil {
					members = append(members, b)
				}
			}
			p, err = routing.NewPool(name, kind, members...)
		} else {
			return nil, fmt.Errorf("%s route target %q is neither a %s backend nor a pool", protocol, name, protocol)
		}
		if err != nil {
			return nil, err
		}
		pools[name] = p
		return p, nil
	}
	var rules []routing.Rule
	for i, r := range routes {
		p, err := target(r.Target())
		if err != nil {
			return nil, nil, fmt.Errorf("routes.%s[%d]: %w", protocol, i, err)
		}
		switch {
		case r.Exact != "":
			rules = append(rules, routing.Rule{Kind: routing.Exact, Pattern: r.Exact, Pool: p})
		case r.Prefix != "":
			rules = append(rules, routing.Rule{Kind: routing.Prefix, Pattern: r.Prefix, Pool: p})
		default:
			rules = append(rules, routing.Rule{Kind: routing.Glob, Pattern: r.Glob, Pool: p})
		}
	}
	var defPool *routing.Pool
	if def != "" {
		var err error
		if defPool, err = target(def); err != nil {
			return nil, nil, fmt.Errorf("routes.%s_default: %w", protocol, err)
		}
	}
	rt, err := routing.NewRules(rules, defPool)
	if err != nil {
		return nil, nil, err
	}
	return rt, pools, nil
}
