package proxy

import "testing"

// TestLoopSlots checks that slots are handed out densely, reused after
// remove, and that removing a connection that no longer holds its slot
// (or never held one) changes nothing.
func TestLoopSlots(t *testing.T) {
	type conn struct{ name string }
	a, b, c, d := &conn{"a"}, &conn{"b"}, &conn{"c"}, &conn{"d"}
	var s loopSlots[*conn]
	if sa, sb := s.add(a), s.add(b); sa != 0 || sb != 1 {
		t.Fatalf("first slots %d, %d; want 0, 1", sa, sb)
	}
	s.remove(0, a)
	if s.items[0] != nil {
		t.Fatalf("slot 0 holds %v after remove", s.items[0])
	}
	if sc := s.add(c); sc != 0 {
		t.Fatalf("c got slot %d, want the freed 0", sc)
	}
	s.remove(0, a) // a's slot now holds c
	s.remove(7, d) // never added
	if s.items[0] != c || len(s.free) != 0 {
		t.Fatalf("a stale remove changed the table: conns %v, free %v", s.items, s.free)
	}
	if sd := s.add(d); sd != 2 || len(s.items) != 3 {
		t.Fatalf("d got slot %d of %d, want 2 of 3", sd, len(s.items))
	}
}

// TestLoopSlotsReserve checks the two-step use of upstream sessions: a
// reserved slot holds the zero value until stored, and a released one is
// handed out again.
func TestLoopSlotsReserve(t *testing.T) {
	var s loopSlots[string]
	i := s.reserve()
	if i != 0 || s.items[0] != "" {
		t.Fatalf("reserve: slot %d holding %q", i, s.items[0])
	}
	s.items[i] = "up"
	j := s.add("other")
	s.release(i)
	if s.items[i] != "" || s.reserve() != i || j != 1 {
		t.Fatalf("release then reserve: items %q, other at %d", s.items, j)
	}
}
