package tracing

import (
	"hash/maphash"
	"sync/atomic"
)

// Names interns the destination names of traced jobs (Gearman functions),
// so that describing a job's send span does not copy its function name out
// of the packet, one allocation per job, when the last jobs had the same
// one. It is a direct-mapped cache: a name evicts the one in its slot, so
// it holds at most namesSlots names of at most namesMaxLen bytes, whatever
// the clients send. The zero Names is ready; safe for concurrent use.
type Names struct {
	slots [namesSlots]atomic.Pointer[string]
}

// namesSeed places the names in a Names' slots.
var namesSeed = maphash.MakeSeed()

// Size of a Names: slots, and the longest name kept (a longer one is
// copied every time).
const (
	namesSlots  = 64
	namesMaxLen = 128
)

// String returns b as a string, the one kept for it when there is one.
func (n *Names) String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > namesMaxLen {
		return string(b)
	}
	slot := &n.slots[maphash.Bytes(namesSeed, b)%namesSlots]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}
