package routing

import (
	"fmt"
	"strings"
	"testing"
)

func TestRulesFirstMatchWins(t *testing.T) {
	pool := func(name string) *Pool {
		p, err := NewPool(name, Single, &Backend{ID: 1, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c, d, def := pool("a"), pool("b"), pool("c"), pool("d"), pool("def")
	rules, err := NewRules([]Rule{
		{Prefix, "mail.", a},
		{Exact, "mail.urgent", b}, // shadowed by the prefix before it
		{Exact, "resize", c},
		{Glob, "img-*-[0-9]", d},
		{Glob, "*", b}, // everything without '/' that got this far
		{Prefix, "img-", a},
	}, def)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want *Pool
		rule int
	}{
		{"mail.urgent", a, 0},
		{"mail.x", a, 0},
		{"resize", c, 2},
		{"img-big-7", d, 3},
		{"img-big-x", b, 4},
		{"anything", b, 4},
		{"has/slash", def, -1},
		{"", b, 4},
		{strings.Repeat("x", 200), b, 4},
	} {
		p, i := rules.Lookup([]byte(tc.name))
		if p != tc.want || i != tc.rule {
			t.Errorf("Lookup(%q) = %s, rule %d; want %s, rule %d", tc.name, p.Name(), i, tc.want.Name(), tc.rule)
		}
	}
	// Exact rules before the scanned ones win over them.
	r2, _ := NewRules([]Rule{{Exact, "img-a-1", c}, {Glob, "img-*", d}}, nil)
	if p := r2.Match([]byte("img-a-1")); p != c {
		t.Errorf("exact rule before a glob lost: %v", p.Name())
	}
	if p := r2.Match([]byte("other")); p != nil {
		t.Errorf("no default: got %v", p.Name())
	}
	if r2.Default() != nil || len(r2.Rules()) != 2 {
		t.Error("Default/Rules accessors")
	}
}

func TestRulesErrors(t *testing.T) {
	p := mustPool(t, Single, &Backend{ID: 1})
	_, err := NewRules([]Rule{
		{Exact, "", p},
		{Glob, "[", p},
		{Exact, "a", nil},
		{Exact, "b", p},
		{Exact, "b", p},
		{MatchKind(0), "c", p},
	}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"rule 0", "rule 1", "rule 2", "rule 4", "rule 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
}

func benchRules(b testing.TB, n int) *Rules {
	p := mustPool(b, Single, &Backend{ID: 1})
	var rs []Rule
	for i := range n {
		switch i % 3 {
		case 0:
			rs = append(rs, Rule{Exact, fmt.Sprintf("exact-%d", i), p})
		case 1:
			rs = append(rs, Rule{Prefix, fmt.Sprintf("prefix-%d.", i), p})
		case 2:
			rs = append(rs, Rule{Glob, fmt.Sprintf("glob-%d-*.[a-z]", i), p})
		}
	}
	r, err := NewRules(rs, p)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func TestRulesAllocs(t *testing.T) {
	r := benchRules(t, 30)
	long := []byte(strings.Repeat("y", 200))
	for _, name := range [][]byte{[]byte("exact-27"), []byte("glob-29-abc.q"), long} {
		if n := testing.AllocsPerRun(100, func() { r.Match(name) }); n != 0 {
			t.Errorf("Match(%.20q): %v allocations", name, n)
		}
	}
}

// BenchmarkRules measures a miss through 30 rules (the worst case: every
// prefix and glob is tried) and an exact hit.
func BenchmarkRules(b *testing.B) {
	r := benchRules(b, 30)
	for _, name := range []string{"exact-27", "no-such-tube-name"} {
		b.Run(name, func(b *testing.B) {
			n := []byte(name)
			b.ReportAllocs()
			for b.Loop() {
				r.Match(n)
			}
		})
	}
}
