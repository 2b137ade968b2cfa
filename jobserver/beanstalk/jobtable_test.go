package beanstalk

import (
	"math/rand/v2"
	"testing"
)

// TestJobTable checks the paged table against a map through random puts
// and deletes, including pages that drain, go sparse and move to overflow.
func TestJobTable(t *testing.T) {
	tab := newJobTable()
	ref := map[uint64]*job{}
	rng := rand.New(rand.NewPCG(1, 2))
	var next uint64 = 1
	check := func() {
		t.Helper()
		for id := uint64(1); id < next; id++ {
			if got, want := tab.get(id), ref[id]; got != want {
				t.Fatalf("get(%d) = %p, want %p", id, got, want)
			}
		}
	}
	for round := range 20 {
		for range 3000 {
			j := &job{id: next}
			next++
			tab.add(j)
			ref[j.id] = j
		}
		// Delete mostly old jobs, leaving stragglers behind.
		for id := range ref {
			if rng.IntN(10) < 8 || round%5 == 4 {
				tab.remove(id)
				delete(ref, id)
			}
		}
		check()
	}
	for id := range ref {
		tab.remove(id)
	}
	if len(tab.pages) > 1 || len(tab.overflow) != 0 { // the page being filled stays
		t.Fatalf("empty table keeps %d pages, %d overflow entries", len(tab.pages), len(tab.overflow))
	}
	if tab.get(5) != nil {
		t.Fatal("get on an empty table")
	}
}
