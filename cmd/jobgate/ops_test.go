package main

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"testing"

	"github.com/jobgate/jobgate/config"
)

// TestOnExitRunsInOrder: the exit hooks run in registration order, each
// once, and their errors are all reported.
func TestOnExitRunsInOrder(t *testing.T) {
	op := newOperator(nil, config.Default(), new(slog.LevelVar), slog.New(slog.DiscardHandler))
	var order []int
	errA, errB := errors.New("a"), errors.New("b")
	op.onExit(func(context.Context) error { order = append(order, 1); return errA })
	op.onExit(func(context.Context) error { order = append(order, 2); return nil })
	op.onExit(func(context.Context) error { order = append(order, 3); return errB })
	err := op.flush(context.Background())
	if len(order) != 3 || order[0] != 1 || order[1] != 2 || order[2] != 3 {
		t.Errorf("ran %v, want [1 2 3]", order)
	}
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Errorf("flush error %v, want a and b", err)
	}
}

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
