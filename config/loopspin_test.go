package config

import (
	"testing"
	"time"
)

// TestEventLoopSpin: loop_spin left at its default is dropped when an
// upstream is on a loopback address, and kept as set otherwise.
func TestEventLoopSpin(t *testing.T) {
	upstreams := func(addrs ...string) *Config {
		t.Helper()
		c, err := Upstreams(addrs, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    *Config
		want time.Duration
	}{
		{"the embedded default", Default(), DefaultLoopSpin},
		{"an upstream elsewhere", upstreams("10.0.0.5:4730", "gm.example:4730"), DefaultLoopSpin},
		{"127.0.0.1", upstreams("10.0.0.5:4730", "127.0.0.1:4730"), 0},
		{"another 127/8 address", upstreams("127.0.1.1:4730"), 0},
		{"::1", upstreams("[::1]:4730"), 0},
		{"localhost", upstreams("localhost:4730"), 0},
	} {
		if got := tc.c.EventLoopSpin(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// Set by a flag or the file, loop_spin holds whatever the backends.
	c := upstreams("127.0.0.1:4730")
	if err := c.Set("loop_spin", "30us"); err != nil {
		t.Fatal(err)
	}
	if got := c.EventLoopSpin(); got != 30*time.Microsecond {
		t.Errorf("-loop-spin 30us with a loopback upstream: %v", got)
	}
	c, err := Parse("spin.yaml", []byte(`
loop_spin: 10us
backends:
  - { name: gm1, id: 1, type: gearman, address: "127.0.0.1:14730" }
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.EventLoopSpin(); got != 10*time.Microsecond {
		t.Errorf("loop_spin: 10us in the file with a loopback upstream: %v", got)
	}
	c, err = Parse("nospin.yaml", []byte("loop_spin: 0s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.EventLoopSpin(); got != 0 {
		t.Errorf("loop_spin: 0s: %v", got)
	}
}
