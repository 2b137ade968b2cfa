package proxy

// loopSlots numbers what an event loop polls (its connections, its
// upstream sessions): an item's slot is its index in items and the id its
// epoll events carry, so an event finds its item without a map. Slots
// freed are reused, which keeps items as long as the most open at once.
// Only the loop goroutine uses it.
type loopSlots[T comparable] struct {
	items []T     // by slot; the zero T in a free slot
	free  []int32 // slots to reuse
}

// reserve takes a free slot, still holding the zero T, for an item that
// needs its id before it can be stored (release gives it back).
func (s *loopSlots[T]) reserve() int32 {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot
	}
	var zero T
	s.items = append(s.items, zero)
	return int32(len(s.items) - 1)
}

// release empties slot and makes it free.
func (s *loopSlots[T]) release(slot int32) {
	var zero T
	s.items[slot] = zero
	s.free = append(s.free, slot)
}

// add stores v in a free slot and returns the slot.
func (s *loopSlots[T]) add(v T) int32 {
	slot := s.reserve()
	s.items[slot] = v
	return slot
}

// remove frees slot if it holds v; an item closed before it was added
// holds none.
func (s *loopSlots[T]) remove(slot int32, v T) {
	if int(slot) < len(s.items) && s.items[slot] == v {
		s.release(slot)
	}
}
