package routing

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestHashGolden pins the shard function: every gateway instance, old and
// new, must agree on which backend owns a name, so a change here would move
// names (and strand jobs) on upgrade.
func TestHashGolden(t *testing.T) {
	// xxhash64 of "" with seed 0, from the xxHash specification.
	if h := nameHash(nil); h != 0xef46db3751d8e999 {
		t.Fatalf("nameHash(\"\") = %#x", h)
	}
	p := mustPool(t, Shard, backends(1, 5)...)
	got := ""
	for _, n := range []string{"", "a", "email", "resize-image", "tube-0.work", "reports/daily"} {
		got += fmt.Sprintf("%s=%d ", n, p.Owner([]byte(n)).ID)
	}
	const want = "=2 a=1 email=5 resize-image=4 tube-0.work=1 reports/daily=4 "
	if got != want {
		t.Errorf("owners changed:\n got %s\nwant %s", got, want)
	}
}

func TestShardRemapOnAdd(t *testing.T) {
	ns := names(10000)
	for n := 1; n <= 8; n++ {
		bs := backends(1, n+1)
		old := mustPool(t, Shard, bs[:n]...)
		grown := mustPool(t, Shard, bs...)
		moved := 0
		for _, name := range ns {
			a, b := old.Owner(name), grown.Owner(name)
			if a == b {
				continue
			}
			if b != bs[n] {
				t.Fatalf("n=%d: %q moved from %s to %s, not to the new backend", n, name, a.Name, b.Name)
			}
			moved++
		}
		frac, want := float64(moved)/float64(len(ns)), 1/float64(n+1)
		if frac < 0.5*want || frac > 1.5*want {
			t.Errorf("n=%d: %.3f of the names moved, want about %.3f", n, frac, want)
		}
	}
}

func TestShardBalance(t *testing.T) {
	const n = 5
	p := mustPool(t, Shard, backends(1, n)...)
	count := map[int]int{}
	ns := names(10000)
	for _, name := range ns {
		count[p.Owner(name).ID]++
	}
	for id := 1; id <= n; id++ {
		if c, want := count[id], len(ns)/n; c < want*3/4 || c > want*5/4 {
			t.Errorf("backend %d owns %d names, want about %d", id, c, want)
		}
	}
}

func TestOrder(t *testing.T) {
	bs := backends(1, 6)
	shard := mustPool(t, Shard, bs...)
	fail := mustPool(t, Failover, bs...)
	for _, name := range names(500) {
		order := shard.Order(name, nil)
		if len(order) != len(bs) || order[0] != shard.Owner(name) {
			t.Fatalf("%q: order %v does not start with the owner", name, order)
		}
		seen := map[*Backend]bool{}
		h := nameHash(name)
		for i, b := range order {
			if seen[b] {
				t.Fatalf("%q: %s twice", name, b.Name)
			}
			seen[b] = true
			if i > 0 && score(h, backendKey(order[i-1].ID)) < score(h, backendKey(b.ID)) {
				t.Fatalf("%q: not in decreasing score", name)
			}
		}
		// Order agrees with the owner after removing the owner: the
		// failover target is who would own the name without it.
		rest := mustPool(t, Shard, order[1:]...)
		if rest.Owner(name) != order[1] {
			t.Fatalf("%q: second in order is %s, owner without the first is %s", name, order[1].Name, rest.Owner(name).Name)
		}
		if got := fail.Order(name, nil); fmt.Sprint(got) != fmt.Sprint(bs) {
			t.Fatalf("failover order %v, want configuration order", got)
		}
	}
	// Appends to dst.
	dst := []*Backend{bs[0]}
	if got := shard.Order([]byte("x"), dst); len(got) != 7 || got[0] != bs[0] {
		t.Errorf("Order did not append: %v", got)
	}
	// Big pools fall back to a heap buffer and still sort.
	big := mustPool(t, Shard, backends(1, 40)...)
	if got := big.Order([]byte("x"), nil); got[0] != big.Owner([]byte("x")) || len(got) != 40 {
		t.Errorf("big pool order wrong")
	}
}

func tripped(t *testing.T) *Breaker {
	t.Helper()
	br, err := NewBreaker(BreakerConfig{Name: "x", Failures: 1})
	if err != nil {
		t.Fatal(err)
	}
	br.Record(&TransportError{Backend: "x", Op: "dial", Err: errors.New("refused")})
	if br.State() != BreakerOpen {
		t.Fatalf("breaker %v, want open", br.State())
	}
	return br
}

func TestPick(t *testing.T) {
	bs := backends(1, 4)
	shard := mustPool(t, Shard, bs...)
	fail := mustPool(t, Failover, bs...)
	name := []byte("email")
	order := shard.Order(name, nil)
	if shard.Pick(name) != order[0] {
		t.Fatal("pick is not the owner while all are available")
	}
	order[0].Breaker = tripped(t)
	if got := shard.Pick(name); got != order[1] {
		t.Fatalf("pick with the owner open = %s, want next in order %s", got.Name, order[1].Name)
	}
	if fail.Pick(name) != bs[0] && order[0] != bs[0] {
		t.Fatal("failover pick is not the first available")
	}
	for _, b := range bs {
		b.Breaker = tripped(t)
	}
	if shard.Pick(name) != nil || fail.Pick(name) != nil {
		t.Fatal("pick with every backend open is not nil")
	}
	for _, b := range bs {
		b.Breaker = nil
	}
	h, _ := NewHealth(HealthConfig{Probe: func(context.Context) error { return nil }, Fall: 1})
	bs[0].Health = h
	h.Observe(errors.New("down"))
	if fail.Pick(name) != bs[1] {
		t.Fatal("failover pick did not skip the backend whose health is down")
	}
}

func TestNewPoolErrors(t *testing.T) {
	b := backends(1, 2)
	for _, tc := range []struct {
		kind PoolKind
		bs   []*Backend
	}{
		{Single, b},
		{Single, nil},
		{Shard, nil},
		{Failover, []*Backend{b[0], b[0]}},
		{Shard, []*Backend{{ID: MaxBackendID + 1}}},
		{Shard, []*Backend{nil}},
		{PoolKind(9), b},
	} {
		if _, err := NewPool("p", tc.kind, tc.bs...); err == nil {
			t.Errorf("NewPool(%v, %v) succeeded", tc.kind, tc.bs)
		}
	}
}

func TestPoolAllocs(t *testing.T) {
	p := mustPool(t, Shard, backends(1, 8)...)
	name := []byte("resize-image")
	dst := make([]*Backend, 0, 8)
	if n := testing.AllocsPerRun(100, func() {
		p.Owner(name)
		p.Pick(name)
		p.Order(name, dst[:0])
	}); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

func BenchmarkShardOwner(b *testing.B) {
	p := mustPool(b, Shard, backends(1, 8)...)
	name := []byte("reports.daily-email")
	b.ReportAllocs()
	for b.Loop() {
		p.Owner(name)
	}
}

func BenchmarkShardOrder(b *testing.B) {
	p := mustPool(b, Shard, backends(1, 8)...)
	name := []byte("reports.daily-email")
	dst := make([]*Backend, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		p.Order(name, dst[:0])
	}
}
