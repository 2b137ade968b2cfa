package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// This file validates what routing is built from: backends, pools, routes,
// and the listeners they must not collide with.

// effectiveType is b's type as routing sees it: the backend named local
// is the local engines whatever its type field says (Validate reports a
// wrong one), and an unknown type serves nothing.
func effectiveType(b Backend) string {
	if b.Name == LocalName {
		return TypeLocal
	}
	return b.Type
}

// routesOf returns the rules for proto (TypeGearman or TypeBeanstalk).
func (c *Config) routesOf(proto string) []Route {
	if proto == TypeGearman {
		return c.Routes.Gearman
	}
	return c.Routes.Beanstalk
}

// defaultRoute returns the default target for proto and its path.
func (c *Config) defaultRoute(proto string) (name, path string) {
	if proto == TypeGearman {
		return c.Routes.GearmanDefault, "routes.gearman_default"
	}
	return c.Routes.BeanstalkDefault, "routes.beanstalk_default"
}

func (v *validator) backends() {
	names := map[string]string{} // name -> path of its first use
	ids := map[int]string{}      // id -> name
	addrs := map[string]string{} // type and address -> path of its first use
	for i, b := range v.c.Backends {
		p := fmt.Sprintf("backends[%d]", i)
		if v.name(p+".name", b.Name) {
			if first, dup := names[b.Name]; dup {
				v.errorf(p+".name", "%q is also %s", b.Name, first)
			} else {
				names[b.Name] = p
			}
		}
		if b.Name == LocalName {
			v.local(p, b)
			continue
		}
		switch b.Type {
		case TypeGearman, TypeBeanstalk:
		case TypeLocal:
			v.errorf(p+".type", `local is only for the backend named "local" (the in-process engines, which exist once)`)
		case "":
			v.errorf(p+".type", "required: gearman or beanstalk")
		default:
			v.errorf(p+".type", "%q is not gearman or beanstalk", b.Type)
		}
		switch {
		case b.ID == LocalID:
			v.errorf(p+".id", "required: a number from 1 to %d that job ids and handles encode; it must never change (0 is the local backend's)", MaxBackendID)
		case b.ID < 1 || b.ID > MaxBackendID:
			v.errorf(p+".id", "%d is out of range: want 1 to %d", b.ID, MaxBackendID)
		default:
			if other, dup := ids[b.ID]; dup {
				v.errorf(p+".id", "%d is also the id of backend %q", b.ID, other)
			} else {
				ids[b.ID] = b.Name
			}
		}
		v.dialAddr(p+".address", b.Address)
		if b.Address != "" {
			key := b.Type + " " + b.Address
			if first, dup := addrs[key]; dup {
				v.errorf(p+".address", "%q is also the address of %s", b.Address, first)
			} else {
				addrs[key] = p
			}
		}
		if b.DialTimeout <= 0 {
			v.errorf(p+".dial_timeout", "%v: want more than 0, or a dead host would hang every request routed to it", b.DialTimeout)
		}
		v.nonNegative(p+".io_timeout", b.IOTimeout)
		v.nonNegative(p+".keepalive", b.Keepalive)
		v.nonNegative(p+".health_interval", b.HealthInterval)
		v.clientTLS(p+".tls", b.TLS)
		v.breaker(p+".breaker", b.Breaker)
	}
}

// local checks a declared local backend: it may only restate what the
// implicit one is.
func (v *validator) local(p string, b Backend) {
	if b.Type != TypeLocal && b.Type != "" {
		v.errorf(p+".type", `%q: the backend named "local" is the in-process engines, type local`, b.Type)
	}
	if b.ID != LocalID {
		v.errorf(p+".id", "%d: the local backend's id is 0", b.ID)
	}
	if b.Address != "" {
		v.errorf(p+".address", "the local backend is in-process and has no address")
	}
	if b.TLS != (ClientTLS{}) {
		v.errorf(p+".tls", "the local backend is in-process and has no TLS")
	}
}

func (v *validator) clientTLS(p string, t ClientTLS) {
	v.pair(p+".cert_file", t.CertFile, p+".key_file", t.KeyFile, false)
	if t.Enabled {
		return
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"ca_file", t.CAFile != ""}, {"cert_file", t.CertFile != ""}, {"key_file", t.KeyFile != ""},
		{"server_name", t.ServerName != ""}, {"insecure_skip_verify", t.InsecureSkipVerify},
	} {
		if f.set {
			v.errorf(p+"."+f.name, "set, but %s.enabled is false", p)
		}
	}
}

func (v *validator) breaker(p string, b Breaker) {
	v.atLeast(p+".failures", b.Failures, 0)
	if b.Failures <= 0 {
		return
	}
	if b.OpenTimeout <= 0 {
		v.errorf(p+".open_timeout", "%v: want more than 0 when failures is set", b.OpenTimeout)
	}
	v.atLeast(p+".half_open_requests", b.HalfOpenRequests, 1)
}

func (v *validator) pools() {
	backendNames := map[string]bool{}
	for _, b := range v.c.AllBackends() {
		backendNames[b.Name] = true
	}
	poolNames := map[string]int{}
	for i, pool := range v.c.Pools {
		p := fmt.Sprintf("pools[%d]", i)
		if v.name(p+".name", pool.Name) {
			switch j, dup := poolNames[pool.Name]; {
			case backendNames[pool.Name]:
				v.errorf(p+".name", "%q is also a backend's name; pools and backends share one namespace", pool.Name)
			case dup:
				v.errorf(p+".name", "%q is also pools[%d]", pool.Name, j)
			default:
				poolNames[pool.Name] = i
			}
		}
		v.oneOf(p+".strategy", pool.Strategy, StrategySingle, StrategyShard, StrategyFailover)
		switch {
		case len(pool.Backends) == 0:
			v.errorf(p+".backends", "empty: a pool needs at least one backend")
		case pool.Strategy == StrategySingle && len(pool.Backends) > 1:
			v.errorf(p+".backends", "%d backends, but strategy single uses exactly one", len(pool.Backends))
		}
		members := map[string]int{}
		byProto := map[string]string{} // protocol -> a member of that protocol
		for j, m := range pool.Backends {
			mp := fmt.Sprintf("%s.backends[%d]", p, j)
			b, ok := v.c.Backend(m)
			switch k, dup := members[m]; {
			case !ok:
				if _, isPool := v.c.Pool(m); isPool {
					v.errorf(mp, "%q is a pool; a pool holds backends", m)
				} else {
					v.errorf(mp, "%q is not a backend", m)
				}
			case dup:
				v.errorf(mp, "%q is also backends[%d] of this pool", m, k)
			default:
				members[m] = j
				if t := effectiveType(b); t == TypeGearman || t == TypeBeanstalk {
					if _, seen := byProto[t]; !seen {
						byProto[t] = m
					}
				}
			}
		}
		if g, b := byProto[TypeGearman], byProto[TypeBeanstalk]; g != "" && b != "" {
			v.errorf(p+".backends", "mixes gearman (%q) and beanstalk (%q) backends; a pool serves one protocol", g, b)
		}
	}
}

// serves reports whether the pool or backend named target can serve proto,
// and if not, why; ok is false with an empty why when target is unknown.
func (c *Config) serves(target, proto string) (ok bool, why string) {
	if b, found := c.Backend(target); found {
		if Serves(effectiveType(b), proto) {
			return true, ""
		}
		return false, fmt.Sprintf("backend %q is type %s and cannot serve %s", target, b.Type, proto)
	}
	if pool, found := c.Pool(target); found {
		for _, m := range pool.Backends {
			if b, found := c.Backend(m); found && !Serves(effectiveType(b), proto) {
				return false, fmt.Sprintf("pool %q holds %s backends (%q) and cannot serve %s", target, b.Type, m, proto)
			}
		}
		return true, ""
	}
	return false, ""
}

func (v *validator) routes() {
	for _, proto := range []string{TypeGearman, TypeBeanstalk} {
		for i, r := range v.c.routesOf(proto) {
			p := fmt.Sprintf("routes.%s[%d]", proto, i)
			var matchers []string
			for _, m := range []struct{ name, val string }{{"exact", r.Exact}, {"prefix", r.Prefix}, {"glob", r.Glob}} {
				if m.val != "" {
					matchers = append(matchers, m.name)
				}
			}
			switch len(matchers) {
			case 0:
				v.errorf(p, "no matcher: set one of exact, prefix or glob")
			case 1:
				if r.Glob != "" {
					v.glob(p+".glob", r.Glob)
				}
			default:
				v.errorf(p+"."+matchers[1], "set with %s: a rule has exactly one of exact, prefix or glob", matchers[0])
			}
			switch {
			case r.Pool == "" && r.Backend == "":
				v.errorf(p, "no target: set pool or backend")
			case r.Pool != "" && r.Backend != "":
				v.errorf(p+".backend", "set with pool: a rule targets one pool or one backend")
			case r.Pool != "":
				if _, ok := v.c.Pool(r.Pool); !ok {
					if _, isBackend := v.c.Backend(r.Pool); isBackend {
						v.errorf(p+".pool", "%q is a backend, not a pool; write backend: %s", r.Pool, r.Pool)
					} else {
						v.errorf(p+".pool", "%q is not a pool", r.Pool)
					}
				} else if ok, why := v.c.serves(r.Pool, proto); !ok {
					v.errorf(p+".pool", "%s", why)
				}
			default:
				if _, ok := v.c.Backend(r.Backend); !ok {
					if _, isPool := v.c.Pool(r.Backend); isPool {
						v.errorf(p+".backend", "%q is a pool, not a backend; write pool: %s", r.Backend, r.Backend)
					} else {
						v.errorf(p+".backend", "%q is not a backend", r.Backend)
					}
				} else if ok, why := v.c.serves(r.Backend, proto); !ok {
					v.errorf(p+".backend", "%s", why)
				}
			}
		}
		name, p := v.c.defaultRoute(proto)
		if name == "" {
			v.errorf(p, `required: the pool or backend for %s names no rule matches ("local" for the in-process engine)`, proto)
		} else if ok, why := v.c.serves(name, proto); !ok {
			if why == "" {
				why = fmt.Sprintf("%q is not a pool or backend", name)
			}
			v.errorf(p, "%s", why)
		}
	}
}

// listeners reports a listen address used twice. Two addresses collide when
// their ports are equal (and not 0) and their hosts are equal or either is
// a wildcard.
func (v *validator) listeners() {
	type listener struct{ path, host, port string }
	var seen []listener
	for _, l := range []struct{ path, addr string }{
		{"gearman.listen", v.c.Gearman.Listen},
		{"gearman.tls_listen", v.c.Gearman.TLSListen},
		{"beanstalk.listen", v.c.Beanstalk.Listen},
		{"beanstalk.tls_listen", v.c.Beanstalk.TLSListen},
		{"admin.listen", v.c.Admin.Listen},
		{"tls.acme.challenge_listen", acmeChallenge(v.c.TLS.ACME)},
	} {
		host, portText, err := net.SplitHostPort(l.addr)
		n, perr := strconv.ParseUint(portText, 10, 16)
		if l.addr == "" || err != nil || perr != nil || n == 0 {
			continue
		}
		port := strconv.FormatUint(n, 10)
		for _, s := range seen {
			if s.port == port && (s.host == host || wildcard(s.host) || wildcard(host)) {
				v.errorf(l.path, "%q collides with %s (%q)", l.addr, s.path, net.JoinHostPort(s.host, s.port))
				break
			}
		}
		seen = append(seen, listener{l.path, host, port})
	}

	// An upstream on this host at one of our own ports is jobgate itself:
	// every job sent there would come back, forever.
	for i, b := range v.c.Backends {
		host, portText, err := net.SplitHostPort(b.Address)
		n, perr := strconv.ParseUint(portText, 10, 16)
		if b.Name == LocalName || err != nil || perr != nil || !loopback(host) {
			continue
		}
		port := strconv.FormatUint(n, 10)
		for _, s := range seen {
			if s.port == port && (wildcard(s.host) || loopback(s.host)) {
				v.errorf(fmt.Sprintf("backends[%d].address", i), "%q is jobgate's own %s (%q): jobs would loop back to it", b.Address, s.path, net.JoinHostPort(s.host, s.port))
				break
			}
		}
	}
}

// loopback reports whether host names this machine over loopback.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// acmeChallenge is the HTTP-01 listener's address, "" when it is not used.
func acmeChallenge(a ACME) string {
	if !a.Enabled() {
		return ""
	}
	return a.ChallengeListen
}

// wildcard reports whether a listen host means every address.
func wildcard(host string) bool {
	return host == "" || host == "0.0.0.0" || host == "::"
}
