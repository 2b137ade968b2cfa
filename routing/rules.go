package routing

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"unsafe"
)

// MatchKind is how a Rule matches a name.
type MatchKind uint8

// The match kinds.
const (
	// Exact matches one name.
	Exact MatchKind = iota + 1
	// Prefix matches the names that start with the pattern.
	Prefix
	// Glob matches names by path.Match: "*" any run of bytes but '/', "?"
	// one such byte, "[a-z]" a class, "\\" an escape.
	Glob
)

// String returns "exact", "prefix" or "glob", the configuration's words.
func (k MatchKind) String() string {
	switch k {
	case Exact:
		return "exact"
	case Prefix:
		return "prefix"
	case Glob:
		return "glob"
	}
	return fmt.Sprintf("MatchKind(%d)", uint8(k))
}

// Rule routes the names it matches to a pool.
type Rule struct {
	// Kind is how Pattern matches.
	Kind MatchKind
	// Pattern is the name, prefix or glob; not empty.
	Pattern string
	// Pool is where matching names go.
	Pool *Pool
}

// Rules is one protocol's routing table: rules tried in order, the first
// match wins, and a default pool for names no rule matches. It is immutable
// and safe for concurrent use.
//
// Lookups allocate nothing and take no lock. Exact rules sit in a map; the
// prefix and glob rules are scanned in order, but only those before the
// exact hit, so the order of the configuration is kept. There is no lookup
// cache: with the handful of rules real configurations have, a scan costs
// less than the synchronisation a shared cache would need (see
// BenchmarkRules).
type Rules struct {
	exact map[string]int // pattern -> index of the first exact rule with it
	scan  []matcher      // the prefix and glob rules, in order
	rules []Rule
	deflt *Pool
}

// matcher is a prefix or glob rule ready for scanning.
type matcher struct {
	index  int    // in Rules.rules
	prefix []byte // the pattern of a Prefix rule, as bytes so HasPrefix needs no conversion
	glob   string // the pattern of a Glob rule
	lit    []byte // the glob's literal start, before any of *?[\ : a cheap first filter
	pool   *Pool
}

// NewRules builds a table from rules, in priority order, and def, the pool
// for names no rule matches (nil: such names have no route). Every problem
// is reported at once: an unknown kind, an empty pattern, a malformed glob,
// a rule without a pool, an exact rule shadowed by an earlier one.
func NewRules(rules []Rule, def *Pool) (*Rules, error) {
	t := &Rules{exact: make(map[string]int), rules: append([]Rule(nil), rules...), deflt: def}
	var errs []error
	for i, r := range rules {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("rule %d (%v %q): %s", i, r.Kind, r.Pattern, fmt.Sprintf(format, a...)))
		}
		if r.Pool == nil {
			bad("no pool")
		}
		if r.Pattern == "" {
			bad("empty pattern")
			continue
		}
		switch r.Kind {
		case Exact:
			if j, dup := t.exact[r.Pattern]; dup {
				bad("never used: rule %d has the same name", j)
				continue
			}
			t.exact[r.Pattern] = i
		case Prefix:
			t.scan = append(t.scan, matcher{index: i, prefix: []byte(r.Pattern), pool: r.Pool})
		case Glob:
			if _, err := path.Match(r.Pattern, ""); err != nil {
				bad("%v", err)
				continue
			}
			lit := r.Pattern[:strings.IndexAny(r.Pattern+"*", `*?[\`)]
			t.scan = append(t.scan, matcher{index: i, glob: r.Pattern, lit: []byte(lit), pool: r.Pool})
		default:
			bad("unknown kind")
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("routing: %w", err)
	}
	return t, nil
}

// Match returns the pool for name, or nil when no rule matches and there is
// no default.
func (t *Rules) Match(name []byte) *Pool {
	p, _ := t.Lookup(name)
	return p
}

// Lookup returns the pool for name and the index of the rule that chose it,
// -1 for the default (for metrics and debugging).
func (t *Rules) Lookup(name []byte) (*Pool, int) {
	// Indexing a map with string(b) does not allocate.
	first, ok := t.exact[string(name)]
	if !ok {
		first = len(t.rules)
	}
	for i := range t.scan {
		m := &t.scan[i]
		if m.index > first {
			break
		}
		switch {
		case m.prefix != nil:
			if bytes.HasPrefix(name, m.prefix) {
				return m.pool, m.index
			}
		case bytes.HasPrefix(name, m.lit):
			if hit, _ := path.Match(m.glob, unsafeString(name)); hit {
				return m.pool, m.index
			}
		}
	}
	if ok {
		return t.rules[first].Pool, first
	}
	return t.deflt, -1
}

// Default returns the default pool (nil if none).
func (t *Rules) Default() *Pool { return t.deflt }

// Rules returns a copy of the rules.
func (t *Rules) Rules() []Rule { return append([]Rule(nil), t.rules...) }

// unsafeString views b as a string without copying. Only for path.Match,
// which neither keeps nor returns its name argument, so the string does not
// outlive this call; copying would allocate for every name over 32 bytes.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
