package upstream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/routing"
)

// breakerCase is one protocol for the breaker and health tests.
type breakerCase struct {
	name string
	args func(int) []string
	// backend returns the routing backend for the server at addr and a
	// function that opens (and closes) one session through it.
	backend func(t *testing.T, addr string) (*routing.Backend, func() error, func(context.Context) error)
}

var breakerCases = []breakerCase{
	{"gearmand", gearmandArgs, func(t *testing.T, addr string) (*routing.Backend, func() error, func(context.Context) error) {
		g := newGearman(t, addr, time.Second)
		b := &routing.Backend{ID: 1, Name: "g", Gearman: g}
		return b, func() error {
			c, err := b.OpenGearman(context.Background(), routing.GearmanEvents{Packet: func(*gearman.Packet) {}})
			if err == nil {
				c.Close()
			}
			return err
		}, g.Probe
	}},
	{"beanstalkd", beanstalkdArgs, func(t *testing.T, addr string) (*routing.Backend, func() error, func(context.Context) error) {
		bs := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: addr, IOTimeout: time.Second}})
		b := &routing.Backend{ID: 1, Name: "b", Beanstalk: bs}
		return b, func() error {
			c, err := b.OpenBeanstalk(context.Background(), nil)
			if err == nil {
				c.Close()
			}
			return err
		}, bs.Probe
	}},
}

// TestBreakerAroundUpstream: dials to a dead port open the breaker; once
// the server is back on the same port, the breaker lets a trial through
// and closes. The breaker's open timeout is wall-clock time (gobreaker
// takes no clock, see routing.Breaker), so it is short and the wait for it
// is polled under a generous deadline.
func TestBreakerAroundUpstream(t *testing.T) {
	for _, tc := range breakerCases {
		t.Run(tc.name, func(t *testing.T) {
			port := testutil.FreePort(t)
			srv := startProcess(t, tc.name, port, tc.args)
			srv.kill()
			b, open, _ := tc.backend(t, srv.addr)
			var mu sync.Mutex
			var states []string
			br, err := routing.NewBreaker(routing.BreakerConfig{Name: "x", Failures: 3, OpenTimeout: 100 * time.Millisecond,
				OnStateChange: func(_ string, from, to routing.BreakerState) {
					mu.Lock()
					states = append(states, from.String()+">"+to.String())
					mu.Unlock()
				}})
			if err != nil {
				t.Fatal(err)
			}
			b.Breaker = br
			for i := range 3 {
				if err := open(); !routing.IsTransport(err) {
					t.Fatalf("dial %d to a dead port: %v", i, err)
				}
			}
			if br.State() != routing.BreakerOpen || b.Available() {
				t.Fatalf("breaker %v after 3 refused dials", br.State())
			}
			if err := open(); !errors.Is(err, routing.ErrUnavailable) {
				t.Fatalf("open breaker let a dial through: %v", err)
			}

			startProcess(t, tc.name, port, tc.args)
			for deadline := time.Now().Add(wait); br.State() == routing.BreakerOpen; {
				if time.Now().After(deadline) {
					t.Fatal("breaker never half-opened")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := open(); err != nil {
				t.Fatalf("trial dial: %v", err)
			}
			if br.State() != routing.BreakerClosed {
				t.Fatalf("breaker %v after a good dial", br.State())
			}
			mu.Lock()
			defer mu.Unlock()
			if got := strings.Join(states, " "); got != "closed>open open>half-open half-open>closed" {
				t.Errorf("transitions %s", got)
			}
		})
	}
}

// TestHealthProbes: the probes against a real server, on a fake clock:
// each Advance runs one probe synchronously, so the thresholds are checked
// exactly; only the probe's own I/O is real.
func TestHealthProbes(t *testing.T) {
	for _, tc := range breakerCases {
		t.Run(tc.name, func(t *testing.T) {
			port := testutil.FreePort(t)
			srv := startProcess(t, tc.name, port, tc.args)
			b, _, probe := tc.backend(t, srv.addr)
			clk := clock.NewFake(time.Unix(1e9, 0))
			var changes []bool
			h, err := routing.NewHealth(routing.HealthConfig{Probe: probe, Clock: clk, Interval: time.Second,
				Timeout: wait, Rise: 1, Fall: 2, OnChange: func(up bool) { changes = append(changes, up) }})
			if err != nil {
				t.Fatal(err)
			}
			b.Health = h
			h.Start()
			t.Cleanup(h.Stop)
			clk.Advance(time.Second)
			if !b.Available() || len(changes) != 0 {
				t.Fatalf("healthy server: available %v, changes %v", b.Available(), changes)
			}
			srv.kill()
			clk.Advance(time.Second)
			if !b.Available() {
				t.Fatal("down after one failed probe; fall is 2")
			}
			clk.Advance(time.Second)
			if b.Available() {
				t.Fatal("up after two failed probes")
			}
			startProcess(t, tc.name, port, tc.args)
			clk.Advance(time.Second)
			if !b.Available() || len(changes) != 2 || changes[0] || !changes[1] {
				t.Fatalf("after restart: available %v, changes %v", b.Available(), changes)
			}
		})
	}
}
