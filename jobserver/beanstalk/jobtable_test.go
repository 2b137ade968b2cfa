package beanstalk

import (
	"math/rand/v2"
	"testing"
)

// TestJobTable checks the paged table against a map through random puts
// and deletes, including pages that drain, go sparse and move to overflow;
// in "gaps", ids also skip up to a few pages at random, also right after
// every job was deleted (as after a restart or refused puts). Once every
// job is gone only the page being filled is kept.
func TestJobTable(t *testing.T) {
	t.Run("dense", func(t *testing.T) { testRandomJobTable(t, rand.NewPCG(1, 2), false) })
	t.Run("gaps", func(t *testing.T) { testRandomJobTable(t, rand.NewPCG(5, 6), true) })
}

func testRandomJobTable(t *testing.T, src rand.Source, gaps bool) {
	tab := newJobTable()
	ref := map[uint64]*job{}
	rng := rand.New(src)
	var next uint64 = 1
	skip := func(oneIn int) {
		if gaps && (oneIn == 1 || rng.IntN(oneIn) == 0) {
			next += uint64(rng.IntN(3 * pageSize))
		}
	}
	check := func() {
		t.Helper()
		for id := uint64(1); id < next; id++ {
			if got, want := tab.get(id), ref[id]; got != want {
				t.Fatalf("get(%d) = %p, want %p", id, got, want)
			}
		}
	}
	for round := range 20 {
		skip(1)
		for range 3000 {
			skip(200)
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
	for n := range tab.pages {
		if n != tab.maxID>>pageBits {
			t.Fatalf("page %d kept with no jobs (filling page %d)", n, tab.maxID>>pageBits)
		}
	}
	if len(tab.overflow) != 0 {
		t.Fatalf("%d overflow entries left", len(tab.overflow))
	}
	if tab.get(5) != nil {
		t.Fatal("get on an empty table")
	}
}
