package routing

import (
	"fmt"
	"strconv"
)

// The form of a client-visible Gearman job handle (DESIGN decision 3):
//
//	local backend:  the engine's handle unchanged, e.g. "H:gw1:42"
//	backend 7:      "@7:" + gearmand's handle,     e.g. "@7:H:gear3:1041"
//
// The mark '@' never starts a handle of gearmand ("H:host:n") or of the local
// engine with its default prefix, so the local handles of a plain default
// configuration pass through unchanged. A local handle that does start with
// '@' (a configured prefix could) is written "@0:" + handle, so decoding is
// never ambiguous. The id is decimal without leading zeros, so every job has
// exactly one client-visible handle.
//
// A handle holds at most MaxHandleLen bytes (gearmand's 64 with the NUL). An
// upstream handle too long for its prefix cannot be given to a client:
// Append fails with ErrIDOverflow and the proxy answers an ERROR packet
// instead of a handle that would not round-trip. gearmand's handles are
// "H:" + host name + ":" + counter, so this only bites with host names of
// over 40 bytes; give such servers shorter names.
const (
	// HandleMark starts every rewritten handle.
	HandleMark = '@'
	// MaxHandleLen is the longest handle a client may be given.
	MaxHandleLen = 63
)

// HandleMap encodes Gearman job handles for clients and decodes them back,
// with no state beyond the set of backends. It is immutable and safe for
// concurrent use; its methods allocate nothing (Append given room).
type HandleMap struct {
	backends    *backendSet
	passthrough bool
}

// NewHandleMap returns the map for the Gearman backends (every backend
// reachable by some rule, pool or default).
func NewHandleMap(backends []*Backend) (*HandleMap, error) {
	s, onlyLocal, err := newBackendSet("handle map", backends)
	if err != nil {
		return nil, err
	}
	return &HandleMap{backends: s, passthrough: onlyLocal}, nil
}

// Passthrough reports whether handles are not rewritten at all (the local
// backend is the only one).
func (m *HandleMap) Passthrough() bool { return m.passthrough }

// Append appends the handle a client sees for handle on backend b to dst.
// It fails with ErrIDOverflow when the result would exceed MaxHandleLen and
// with ErrUnknownBackend for a backend the map does not know; dst is then
// returned unchanged.
func (m *HandleMap) Append(dst []byte, b *Backend, handle []byte) ([]byte, error) {
	if b == nil || b.ID < 0 || b.ID > MaxBackendID || m.backends[b.ID] != b {
		return dst, ErrUnknownBackend
	}
	if m.passthrough || (b.ID == LocalID && (len(handle) == 0 || handle[0] != HandleMark)) {
		return append(dst, handle...), nil
	}
	start := len(dst)
	dst = append(dst, HandleMark)
	dst = strconv.AppendUint(dst, uint64(b.ID), 10)
	dst = append(dst, ':')
	if n := len(dst) - start + len(handle); n > MaxHandleLen {
		return dst[:start], fmt.Errorf("%w: handle %q on backend %q would be %d bytes, over %d",
			ErrIDOverflow, handle, b.Name, n, MaxHandleLen)
	}
	return append(dst, handle...), nil
}

// Decode returns the backend and its own handle for a client-visible handle.
// The handle returned aliases h. A handle no backend of the map can hold
// (garbled, made up, from another configuration) gives a nil Backend: the
// proxy answers as gearmand does for an unknown handle (STATUS_RES with
// known 0, ERROR JOB_NOT_FOUND for WORK_*). Decode never panics, whatever h.
func (m *HandleMap) Decode(h []byte) (*Backend, []byte) {
	if m.passthrough {
		return m.backends[LocalID], h
	}
	if len(h) == 0 || h[0] != HandleMark {
		return m.backends[LocalID], h
	}
	// "@" id ":" handle, id decimal 0..MaxBackendID without leading zeros.
	id, i := 0, 1
	for ; i < len(h) && i <= 5 && h[i] >= '0' && h[i] <= '9'; i++ {
		id = id*10 + int(h[i]-'0')
	}
	digits := i - 1
	if digits == 0 || digits > 4 || (digits > 1 && h[1] == '0') || id > MaxBackendID ||
		i >= len(h) || h[i] != ':' {
		return nil, nil
	}
	rest := h[i+1:]
	if id == LocalID && (len(rest) == 0 || rest[0] != HandleMark) {
		// "@0:" is only written before a local handle that starts with
		// the mark; anything else is not a handle we gave out.
		return nil, nil
	}
	b := m.backends[id]
	if b == nil {
		return nil, nil
	}
	return b, rest
}

// Each calls f for every backend of the map: those whose handles Decode
// can return, routed to or not.
func (m *HandleMap) Each(f func(*Backend)) {
	for _, b := range m.backends {
		if b != nil {
			f(b)
		}
	}
}
