package proxy

import (
	"slices"

	"github.com/jobgate/jobgate/routing"
)

// sameBackend reports whether a and b are one backend for the merged admin
// listings: the same id at the same address. A configuration reload that
// changes anything else of a backend (a timeout) builds a new
// *routing.Backend, while the sessions and abilities made before it keep
// the old one, still connected to the same server; a backend whose
// address changed is another server, which does not list them.
func sameBackend(a, b *routing.Backend) bool {
	return a == b || (a.ID == b.ID && backendAddr(a) == backendAddr(b))
}

// backendAddr is an upstream backend's address; "" for the local engine.
func backendAddr(b *routing.Backend) string {
	if a, ok := b.Gearman.(interface{ Addr() string }); ok {
		return a.Addr()
	}
	return ""
}

// containsBackend reports whether bs holds b (sameBackend).
func containsBackend(bs []*routing.Backend, b *routing.Backend) bool {
	return slices.ContainsFunc(bs, func(x *routing.Backend) bool { return sameBackend(x, b) })
}
