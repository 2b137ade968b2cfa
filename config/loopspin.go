package config

import (
	"net"
	"time"
)

// EventLoopSpin returns how long the event loops poll before they block:
// loop_spin when the file or a flag set it. Left at its default, it is 0
// when an upstream backend's address is a loopback one: that server
// shares this machine's CPUs, and a spinning loop takes the CPU the
// server needs to answer it (docs/BENCHMARKS.md, "Spinning before the
// loop sleeps"). An address whose name resolves to this machine some
// other way is not recognised; set loop_spin: 0s for it.
func (c *Config) EventLoopSpin() time.Duration {
	if c.IsSet("loop_spin") {
		return c.LoopSpin
	}
	for _, b := range c.Backends {
		if b.Type != TypeLocal && isLoopback(b.Address) {
			return 0
		}
	}
	return c.LoopSpin
}

// isLoopback reports whether a host:port names this machine by a
// loopback address or as localhost.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
