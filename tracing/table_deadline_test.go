package tracing

import "testing"

// stopCounter is a deadline timer that counts its stops.
type stopCounter struct{ stops int }

func (s *stopCounter) Stop() bool { s.stops++; return true }

// TestTableStopsDeadlines: an entry's deadline timer is stopped when the
// table evicts the entry, when EndOpen ends its span, and by StopDeadline,
// once each.
func TestTableStopsDeadlines(t *testing.T) {
	tb := NewTable[int](1)
	evicted := &stopCounter{}
	tb.Put(1, Entry{Deadline: evicted})
	tb.Put(2, Entry{}) // evicts 1
	if evicted.stops != 1 {
		t.Errorf("evicted entry's timer stopped %d times, want 1", evicted.stops)
	}
	ended := &stopCounter{}
	tb.Update(2, func(e *Entry) { e.Deadline = ended })
	tb.EndOpen("shutdown")
	tb.EndOpen("shutdown")
	if ended.stops != 1 {
		t.Errorf("EndOpen stopped the timer %d times, want 1", ended.stops)
	}
	own := &stopCounter{}
	e := Entry{Deadline: own}
	e.StopDeadline()
	e.StopDeadline()
	if own.stops != 1 || e.Deadline != nil {
		t.Errorf("StopDeadline: %d stops, deadline %v", own.stops, e.Deadline)
	}
}
