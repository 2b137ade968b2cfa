package main

import (
	"math"
	"testing"

	"github.com/jobgate/jobgate/config"
)

// TestLimitsFromConfig: every limit reaches the servers, and a write
// buffer limit of 0 means no limit there too.
func TestLimitsFromConfig(t *testing.T) {
	l := config.Default().Limits
	l.MaxConnectionsPerIP, l.IdleTimeout, l.ReadTimeout, l.MaxReservedPerConn = 3, 4, 5, 6
	got := limitsFrom(l)
	if got.MaxConns != 10000 || got.MaxConnsPerIP != 3 || got.IdleTimeout != 4 || got.ReadTimeout != 5 ||
		got.WriteTimeout != l.WriteTimeout || got.MaxReservedPerConn != 6 || got.WriteBufferLimit != 16<<20 ||
		got.HandshakeTimeout != l.HandshakeTimeout || l.HandshakeTimeout == 0 || got.MaxHandshakes != 1000 {
		t.Errorf("limitsFrom(%+v) = %+v", l, got)
	}
	l.WriteBufferLimit = 0
	if got := limitsFrom(l).WriteBufferLimit; got != math.MaxInt {
		t.Errorf("write_buffer_limit 0 became %d, want no limit", got)
	}
}
