package auth

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"unsafe"
)

// Action is what a request wants to do with a name; see [BeanstalkNeed] and
// [GearmanNeed] for which requests need which.
type Action uint8

// Actions. Each maps to one right of config.Rule, except Observe.
const (
	// None needs no right: the request touches only the client's own
	// session or jobs it already holds.
	None Action = iota
	// Produce: submit jobs to a Gearman function, put into a Beanstalk tube
	// (rule field produce).
	Produce
	// Consume: work on a function (CAN_DO), watch/reserve/peek/kick/delete
	// in a tube (rule field consume).
	Consume
	// Observe: read a name's counters (Beanstalk stats-tube): allowed to
	// anyone who may produce to or consume from the name, so producers can
	// watch their queue depth.
	Observe
	// Admin: server-wide commands (rule field admin); the name is ignored.
	Admin
	numActions
)

var actionNames = [numActions]string{"none", "produce", "consume", "observe", "admin"}

// String returns the action's lower-case name.
func (a Action) String() string {
	if a < numActions {
		return actionNames[a]
	}
	return "Action(" + fmt.Sprint(uint8(a)) + ")"
}

// Decision is the outcome of Decide. The zero value denies.
type Decision uint8

// Decisions.
const (
	// Deny: the client is identified but no rule grants the action on
	// the name.
	Deny Decision = iota
	// Allow: go ahead.
	Allow
	// DenyAnonymous: auth is enabled and the client matched no identity.
	DenyAnonymous
)

// Allowed reports whether the request may proceed.
func (d Decision) Allowed() bool { return d == Allow }

// String returns "allowed", "denied" or "denied-anonymous", for logs.
func (d Decision) String() string {
	switch d {
	case Allow:
		return "allowed"
	case DenyAnonymous:
		return "denied-anonymous"
	}
	return "denied"
}

// Decide says whether id may do a on name (a function or tube name; ignored
// for Admin and None). With auth disabled (or a nil Policy) everything is
// allowed; with it enabled, whatever no rule grants is denied, and so is
// everything for an identity another Policy returned. It does not
// allocate and takes a few tens of nanoseconds for typical rule sets, so the
// proxy calls it on every request.
func (p *Policy) Decide(id Identity, a Action, name []byte) Decision {
	if p == nil || !p.enabled || a == None {
		return Allow
	}
	pr := id.p
	if pr == nil {
		return DenyAnonymous
	}
	if pr.policy != p {
		return Deny // an identity from a replaced Policy: its rights are stale
	}
	var ok bool
	switch a {
	case Produce:
		ok = pr.produce.match(name)
	case Consume:
		ok = pr.consume.match(name)
	case Observe:
		ok = pr.produce.match(name) || pr.consume.match(name)
	case Admin:
		ok = pr.admin
	}
	if ok {
		return Allow
	}
	return Deny
}

// DecideString is Decide for a name held as a string.
func (p *Policy) DecideString(id Identity, a Action, name string) Decision {
	return p.Decide(id, a, unsafe.Slice(unsafe.StringData(name), len(name)))
}

// globSet is a compiled list of path.Match globs. Most globs in practice are
// literals or "prefix*", so those are matched without path.Match; the rest
// fall back to it.
type globSet struct {
	exact map[string]struct{}
	// prefixes are the literal parts of "prefix*" globs: a name matches if
	// it starts with one and has no '/' after it ('*' stops at '/').
	prefixes []string
	// patterns are the other globs, for path.Match.
	patterns []pattern
}

// pattern is a glob for path.Match with its literal lead (the bytes before
// the first metacharacter): a name not starting with it cannot match, which
// rejects most names without running path.Match.
type pattern struct {
	lead, glob string
}

const globMeta = `*?[\`

func (g *globSet) add(globs ...string) error {
	for _, pat := range globs {
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("%q: %w", pat, err)
		}
		switch lit := strings.TrimSuffix(pat, "*"); {
		case !strings.ContainsAny(pat, globMeta):
			if g.exact == nil {
				g.exact = map[string]struct{}{}
			}
			g.exact[pat] = struct{}{}
		case len(lit) == len(pat)-1 && !strings.ContainsAny(lit, globMeta):
			g.prefixes = append(g.prefixes, lit)
		default:
			lead := pat[:strings.IndexAny(pat, globMeta)]
			g.patterns = append(g.patterns, pattern{lead: lead, glob: pat})
		}
	}
	return nil
}

func (g *globSet) match(name []byte) bool {
	// A string(name) map index does not allocate.
	if _, ok := g.exact[string(name)]; ok {
		return true
	}
	for _, pre := range g.prefixes {
		if len(name) >= len(pre) && string(name[:len(pre)]) == pre && bytes.IndexByte(name[len(pre):], '/') < 0 {
			return true
		}
	}
	if len(g.patterns) == 0 {
		return false
	}
	// path.Match takes strings; it neither keeps nor changes its
	// argument, so a string viewing name's bytes saves a copy per request.
	s := unsafe.String(unsafe.SliceData(name), len(name))
	for _, pat := range g.patterns {
		if !strings.HasPrefix(s, pat.lead) {
			continue
		}
		if ok, _ := path.Match(pat.glob, s); ok {
			return true
		}
	}
	return false
}
