package config

import (
	"fmt"
	"strings"
)

// Names of what [Upstreams] builds.
const (
	// UpstreamGearmanPool and UpstreamBeanstalkPool are the pools of the
	// one-line gateway.
	UpstreamGearmanPool   = "gearman-upstream"
	UpstreamBeanstalkPool = "beanstalk-upstream"
	// UpstreamBeanstalkIDBase is added to a Beanstalk upstream's position
	// to make its id, so that Gearman and Beanstalk ids never collide and
	// adding a server of one protocol never renumbers the other's (ids
	// are encoded in the job ids and handles clients hold).
	UpstreamBeanstalkIDBase = 512
)

// Upstreams returns the configuration of the one-line gateway, what the
// -gearman-upstream and -beanstalk-upstream flags ask for: [Default], plus
// the gearmand servers at the gearman addresses as backends gearman-1,
// gearman-2, ... (ids 1, 2, ...) in a shard pool that every Gearman function
// is routed to, and likewise the beanstalkd servers as beanstalk-1, ...
// (ids 513, 514, ...) for every tube. A protocol with no addresses stays on
// the local engine. Addresses are host:port, surrounding spaces ignored;
// the order matters, since a server's id comes from its position, so
// append new servers at the end. At most 511 servers per protocol.
//
// Upstreams checks only the addresses: the error is [Errors] naming the
// flag, e.g. "command line: -gearman-upstream: ...". Apply the other flags
// (see [FlagFields]) and then call [Config.Validate], which also catches an
// upstream that is jobgate's own listener.
func Upstreams(gearman, beanstalk []string) (*Config, error) {
	c := Default()
	var errs Errors
	add := func(proto, pool string, idBase int, addrs []string, route *string) {
		if len(addrs) == 0 {
			return
		}
		p := Pool{Name: pool, Strategy: StrategyShard}
		for i, a := range addrs {
			b := DefaultBackend()
			b.Name = fmt.Sprintf("%s-%d", proto, i+1)
			b.ID = idBase + i + 1
			b.Type = proto
			b.Address = strings.TrimSpace(a)
			flag := "-" + proto + "-upstream"
			if b.ID > idBase+UpstreamBeanstalkIDBase-1 {
				errs = append(errs, &FieldError{File: "command line", Path: flag,
					Msg: fmt.Sprintf("%d servers: at most %d", len(addrs), UpstreamBeanstalkIDBase-1)})
				return
			}
			v := &validator{c: c}
			v.dialAddr(flag, b.Address)
			for j, prev := range addrs[:i] {
				if strings.TrimSpace(prev) == b.Address {
					v.errorf(flag, "%q is listed twice (also server %d)", b.Address, j+1)
					break
				}
			}
			for _, e := range v.errs {
				e.File = "command line"
			}
			errs = append(errs, v.errs...)
			c.Backends = append(c.Backends, b)
			p.Backends = append(p.Backends, b.Name)
		}
		c.Pools = append(c.Pools, p)
		*route = pool
	}
	add(TypeGearman, UpstreamGearmanPool, 0, gearman, &c.Routes.GearmanDefault)
	add(TypeBeanstalk, UpstreamBeanstalkPool, UpstreamBeanstalkIDBase, beanstalk, &c.Routes.BeanstalkDefault)
	if len(errs) > 0 {
		return nil, errs
	}
	// Mark routing as set on the command line, so that errors from a later
	// Validate say where the values came from.
	c.src = &source{cli: map[string]bool{"backends": true, "pools": true, "routes": true}}
	return c, nil
}
