package auth

import (
	"fmt"
	"testing"

	"github.com/jobgate/jobgate/config"
)

// benchPolicy is a realistic policy: 20 teams, each with exact, prefix and
// class globs, and one identity holding all three kinds.
func benchPolicy(tb testing.TB) (*Policy, Identity) {
	cfg := config.Auth{Enabled: true}
	for i := range 20 {
		name := fmt.Sprintf("team%d", i)
		cfg.Identities = append(cfg.Identities, config.Identity{Name: name, CIDRs: []string{fmt.Sprintf("10.%d.0.0/16", i)}})
		cfg.Rules = append(cfg.Rules, config.Rule{
			Identity: name,
			Produce:  []string{name + ".*", name + "-mail", name + "-[0-9][0-9]"},
			Consume:  []string{name + ".render", name + ".tasks.*"},
		})
	}
	p, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return p, p.principals[19].identity()
}

func (pr *principal) identity() Identity { return Identity{pr, MethodCIDR} }

var benchCases = []struct {
	name string
	a    Action
	in   string
}{
	{"exact", Produce, "team19-mail"},
	{"prefix", Produce, "team19.invoices"},
	{"class", Produce, "team19-42"},
	{"deny", Produce, "team3.invoices"},
	{"admin", Admin, ""},
}

// TestDecideAllocs holds Decide to its promise: no allocation, on any path.
func TestDecideAllocs(t *testing.T) {
	p, id := benchPolicy(t)
	for _, bc := range benchCases {
		name := []byte(bc.in)
		if n := testing.AllocsPerRun(100, func() { p.Decide(id, bc.a, name) }); n != 0 {
			t.Errorf("%s: %v allocations", bc.name, n)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	p, id := benchPolicy(b)
	for _, bc := range benchCases {
		name := []byte(bc.in)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Decide(id, bc.a, name)
			}
		})
	}
}
