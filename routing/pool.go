package routing

import (
	"errors"
	"fmt"
)

// PoolKind is how a Pool spreads names over its backends.
type PoolKind uint8

// The pool kinds.
const (
	// Single sends every name to its only backend.
	Single PoolKind = iota + 1
	// Shard gives each name an owner by rendezvous hashing of the name
	// (DESIGN decision 6): adding a backend to n moves about 1/(n+1) of
	// the names, all of them to the new backend.
	Shard
	// Failover sends every name to the first backend in the configured
	// order; Pick skips unavailable ones.
	Failover
)

// String returns "single", "shard" or "failover", the configuration's words.
func (k PoolKind) String() string {
	switch k {
	case Single:
		return "single"
	case Shard:
		return "shard"
	case Failover:
		return "failover"
	}
	return fmt.Sprintf("PoolKind(%d)", uint8(k))
}

// orderStack is how many backends Order sorts without allocating scratch
// space; bigger pools are unusual and pay one allocation per call.
const orderStack = 32

// Pool is a group of backends of one protocol that a rule targets. It is
// immutable and safe for concurrent use; its methods allocate nothing
// (Order given a dst with room).
type Pool struct {
	name     string
	kind     PoolKind
	backends []*Backend
	keys     []uint64 // backendKey of each backend, for Shard
}

// NewPool returns a pool of the given backends, in configuration order (the
// failover order; irrelevant to Shard). A Single pool has exactly one
// backend; the others at least one, each backend once (by ID).
func NewPool(name string, kind PoolKind, backends ...*Backend) (*Pool, error) {
	var errs []error
	switch kind {
	case Single:
		if len(backends) != 1 {
			errs = append(errs, fmt.Errorf("a single pool has exactly one backend, not %d", len(backends)))
		}
	case Shard, Failover:
		if len(backends) == 0 {
			errs = append(errs, errors.New("no backends"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown kind %v", kind))
	}
	seen := make(map[int]bool, len(backends))
	keys := make([]uint64, len(backends))
	for i, b := range backends {
		switch {
		case b == nil:
			errs = append(errs, fmt.Errorf("backend %d is nil", i))
			continue
		case b.ID < 0 || b.ID > MaxBackendID:
			errs = append(errs, fmt.Errorf("backend %q: id %d out of range 0-%d", b.Name, b.ID, MaxBackendID))
		case seen[b.ID]:
			errs = append(errs, fmt.Errorf("backend id %d appears twice", b.ID))
		}
		seen[b.ID] = true
		keys[i] = backendKey(b.ID)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("routing: pool %q: %w", name, err)
	}
	return &Pool{name: name, kind: kind, backends: append([]*Backend(nil), backends...), keys: keys}, nil
}

// Name returns the pool's name.
func (p *Pool) Name() string { return p.name }

// Kind returns how the pool spreads names.
func (p *Pool) Kind() PoolKind { return p.kind }

// Backends returns the pool's backends in configuration order: everything a
// consumer must drain for any name (DESIGN decision 6). The slice is shared:
// do not modify it.
func (p *Pool) Backends() []*Backend { return p.backends }

// Owner returns the backend that owns name: where producers send it while
// that backend is available.
func (p *Pool) Owner(name []byte) *Backend {
	if p.kind != Shard || len(p.backends) == 1 {
		return p.backends[0]
	}
	h := nameHash(name)
	best, bestScore := 0, uint64(0)
	for i, k := range p.keys {
		if s := score(h, k); s > bestScore || i == 0 {
			best, bestScore = i, s
		}
	}
	return p.backends[best]
}

// Pick returns the first available backend (Backend.Available) in name's
// Order, or nil when none is: the owner while it is available, else the
// producer failover target. It allocates nothing.
func (p *Pool) Pick(name []byte) *Backend {
	if p.kind != Shard {
		for _, b := range p.backends {
			if b.Available() {
				return b
			}
		}
		return nil
	}
	h := nameHash(name)
	var best *Backend
	var bestScore uint64
	for i, k := range p.keys {
		b := p.backends[i]
		if s := score(h, k); (best == nil || s > bestScore) && b.Available() {
			best, bestScore = b, s
		}
	}
	return best
}

// Order appends every backend of the pool to dst, owner first, and returns
// the extended slice: for Shard the rest follow in decreasing score (the
// order producers fail over in, the same on every gateway), for Single and
// Failover the configuration order. It allocates only when dst lacks room
// (or for Shard pools over 32 backends).
func (p *Pool) Order(name []byte, dst []*Backend) []*Backend {
	start := len(dst)
	dst = append(dst, p.backends...)
	if p.kind != Shard || len(p.backends) == 1 {
		return dst
	}
	out := dst[start:]
	var stack [orderStack]uint64
	scores := stack[:0]
	if len(p.keys) > orderStack {
		scores = make([]uint64, 0, len(p.keys))
	}
	h := nameHash(name)
	for _, k := range p.keys {
		scores = append(scores, score(h, k))
	}
	// Insertion sort, descending: pools are small and this keeps the
	// scores and the backends in step without an interface or closure.
	for i := 1; i < len(out); i++ {
		s, b := scores[i], out[i]
		j := i
		for ; j > 0 && scores[j-1] < s; j-- {
			scores[j], out[j] = scores[j-1], out[j-1]
		}
		scores[j], out[j] = s, b
	}
	return dst
}
