package routing

import (
	"errors"
	"fmt"
)

// The layout of a client-visible Beanstalk job id (DESIGN decision 3):
//
//	bit 63 ... 53 | 52 ........ 43 | 42 ............ 0
//	     zero     |   backend id   |   upstream job id
//
// Ids stay below 2^53 so JavaScript clients (float64 numbers) keep every id
// exactly. Ten bits name up to 1024 backends; 43 bits leave 8.8e12 upstream
// ids, 2.8 years of beanstalkd assigning 100,000 ids a second without a
// restart that resets its counter.
//
// An upstream id that does not fit (2^43 or more) cannot be given to a
// client: Encode fails with ErrIDOverflow and the proxy answers
// INTERNAL_ERROR rather than an id that would name another job. The job
// itself is untouched on its backend (the proxy should release a reserved
// one), and the remedy is operational: drain that beanstalkd and restart it
// without its binlog, which restarts its ids at 1.
//
// The local backend (id 0) encodes as the identity on ids below 2^43. When it
// is the only Beanstalk backend there is nothing to tell apart, and every id
// passes through unchanged, whatever its size: the default configuration
// behaves exactly like a plain beanstalkd.
const (
	// IDBits is the width of client-visible ids once mapping is on.
	IDBits = 53
	// BackendIDBits is the width of the backend id field.
	BackendIDBits = 10
	// UpstreamIDBits is the width of the upstream id field.
	UpstreamIDBits = IDBits - BackendIDBits
	// MaxUpstreamID is the largest upstream id that can be encoded.
	MaxUpstreamID = 1<<UpstreamIDBits - 1
)

// Errors of IDMap.Encode and HandleMap.Append.
var (
	// ErrIDOverflow: the upstream id or handle does not fit the
	// client-visible form. Answer INTERNAL_ERROR / an ERROR packet.
	ErrIDOverflow = errors.New("routing: upstream id too large to encode")
	// ErrUnknownBackend: the backend is not one the map was built with.
	ErrUnknownBackend = errors.New("routing: backend not in the map")
)

// backendSet is the backends a map knows, indexed by id.
type backendSet [MaxBackendID + 1]*Backend

// newBackendSet indexes backends by id, rejecting bad and duplicate ids.
func newBackendSet(what string, backends []*Backend) (*backendSet, bool, error) {
	var s backendSet
	var errs []error
	onlyLocal := len(backends) > 0
	for _, b := range backends {
		switch {
		case b == nil:
			errs = append(errs, errors.New("nil backend"))
			continue
		case b.ID < 0 || b.ID > MaxBackendID:
			errs = append(errs, fmt.Errorf("backend %q: id %d out of range 0-%d", b.Name, b.ID, MaxBackendID))
			continue
		case s[b.ID] != nil && s[b.ID] != b:
			errs = append(errs, fmt.Errorf("backends %q and %q share id %d", s[b.ID].Name, b.Name, b.ID))
		}
		s[b.ID] = b
		onlyLocal = onlyLocal && b.ID == LocalID
	}
	if err := errors.Join(errs...); err != nil {
		return nil, false, fmt.Errorf("routing: %s: %w", what, err)
	}
	return &s, onlyLocal, nil
}

// IDMap encodes Beanstalk job ids for clients and decodes them back, with no
// state beyond the set of backends: any gateway with the same backends
// decodes any id. It is immutable and safe for concurrent use.
type IDMap struct {
	backends    *backendSet
	passthrough bool
}

// NewIDMap returns the map for one protocol's backends (every backend
// reachable by some rule, pool or default).
func NewIDMap(backends []*Backend) (*IDMap, error) {
	s, onlyLocal, err := newBackendSet("id map", backends)
	if err != nil {
		return nil, err
	}
	return &IDMap{backends: s, passthrough: onlyLocal}, nil
}

// Passthrough reports whether ids are not rewritten at all (the local
// backend is the only one).
func (m *IDMap) Passthrough() bool { return m.passthrough }

// Encode returns the id a client sees for job id on backend b. It fails
// with ErrIDOverflow when id does not fit (see the layout above) and with
// ErrUnknownBackend for a backend the map does not know.
func (m *IDMap) Encode(b *Backend, id uint64) (uint64, error) {
	if b == nil || b.ID < 0 || b.ID > MaxBackendID || m.backends[b.ID] != b {
		return 0, ErrUnknownBackend
	}
	if m.passthrough {
		return id, nil
	}
	if id > MaxUpstreamID {
		return 0, fmt.Errorf("%w: %d on backend %q exceeds %d", ErrIDOverflow, id, b.Name, uint64(MaxUpstreamID))
	}
	return uint64(b.ID)<<UpstreamIDBits | id, nil
}

// Decode returns the backend and its job id for a client-visible id, or a
// nil Backend when no backend of the map can hold it (an id from another
// configuration, a made-up one): the proxy answers NOT_FOUND, as beanstalkd
// does for an unknown id.
func (m *IDMap) Decode(id uint64) (*Backend, uint64) {
	if m.passthrough {
		return m.backends[LocalID], id
	}
	if id>>IDBits != 0 {
		return nil, 0
	}
	return m.backends[id>>UpstreamIDBits], id & MaxUpstreamID
}

// Each calls f for every backend of the map: those whose ids Decode can
// return, routed to or not.
func (m *IDMap) Each(f func(*Backend)) {
	for _, b := range m.backends {
		if b != nil {
			f(b)
		}
	}
}
