package proxy

// loopSlots numbers an event loop's connections: a connection's slot is
// its index in conns and the id its epoll events carry, so an event
// finds its connection without a map. Slots of closed connections are
// reused, which keeps conns as long as the most connections open at once.
// Only the loop goroutine uses it.
type loopSlots[C comparable] struct {
	conns []C     // by slot; the zero C in a free slot
	free  []int32 // slots to reuse
}

// add stores c in a free slot and returns the slot.
func (s *loopSlots[C]) add(c C) int32 {
	var slot int32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		slot = int32(len(s.conns))
		var zero C
		s.conns = append(s.conns, zero)
	}
	s.conns[slot] = c
	return slot
}

// remove frees slot if it holds c; a connection closed before it was
// added holds none.
func (s *loopSlots[C]) remove(slot int32, c C) {
	if int(slot) >= len(s.conns) || s.conns[slot] != c {
		return
	}
	var zero C
	s.conns[slot] = zero
	s.free = append(s.free, slot)
}
