package journal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

// churn drives a model through ops random operations around a steady
// live set: put a new job, release it (Update of the mutable tail), put it
// again in full, delete it.
type churn struct {
	m    *model
	rng  *rand.Rand
	live []uint64 // live keys, for picking one at random
	next uint64
	last Ticket
}

func (c *churn) body() []byte {
	b := make([]byte, 20+c.rng.IntN(100))
	for i := range b {
		b[i] = byte(c.rng.Uint32())
	}
	return b
}

func (c *churn) put() {
	c.next++
	c.live = append(c.live, c.next)
	c.last = c.m.put(c.next, c.body(), c.rng.Uint64())
}

func (c *churn) pick() (int, uint64) {
	i := c.rng.IntN(len(c.live))
	return i, c.live[i]
}

func (c *churn) step(target int) {
	r := c.rng.IntN(100)
	switch {
	case r < 25 || len(c.live) < target*9/10:
		if len(c.live) > target*11/10 {
			c.del()
			return
		}
		c.put()
	case r < 70: // release with a new priority/delay, the common churn
		_, k := c.pick()
		c.last = c.m.update(k, c.rng.Uint64())
	case r < 75: // the engine rewrites the whole job
		_, k := c.pick()
		c.last = c.m.put(k, c.body(), c.rng.Uint64())
	default:
		c.del()
	}
}

func (c *churn) del() {
	i, k := c.pick()
	c.live[i] = c.live[len(c.live)-1]
	c.live = c.live[:len(c.live)-1]
	c.last = c.m.del(k)
}

// TestCompactionBoundsDisk: 200k operations over a steady ~1000 live jobs
// with small segments keep the directory within 4 × live + 2 segments at
// every checkpoint, and replay afterwards yields exactly the live set with
// the latest state of each job.
func TestCompactionBoundsDisk(t *testing.T) {
	const (
		ops     = 200_000
		target  = 1000
		segSize = 32 << 10
	)
	dir := t.TempDir()
	// No fsyncs: this test is about space, and fsync latency on a shared
	// CI disk would dominate its run time.
	opts := Options{SegmentSize: segSize, Sync: Never, syncFile: noSync, syncDir: noDirSync}
	m := newModel()
	j, _ := openModel(t, dir, opts, m)
	c := &churn{m: m, rng: rand.New(rand.NewPCG(1, 2))}
	for range target {
		c.put()
	}
	var worst float64
	for i := range ops {
		c.step(target)
		if i%1000 == 999 {
			if err := c.last.Wait(); err != nil {
				t.Fatal(err)
			}
			compactionSettled(t, j)
			live := m.liveBytes()
			size := dirBytes(t, dir)
			if bound := 4*live + 2*segSize; size > bound {
				t.Fatalf("after %d ops the directory holds %d bytes, over 4 × %d live + 2 segments = %d",
					i+1, size, live, bound)
			}
			worst = max(worst, float64(size)/float64(live))
		}
	}
	st := j.Stats()
	if st.Compactions == 0 {
		t.Fatal("no automatic compaction ran")
	}
	t.Logf("%d ops: %d compactions, %d segments, %d bytes on disk, %d live, worst size/live %.2f, rewritten %d bytes of %d appended records",
		ops, st.Compactions, st.Segments, st.Bytes, m.liveBytes(), worst, st.CopiedBytes, st.Appends)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newModel()
	j2, rep := openModel(t, dir, opts, m2)
	j2.Close()
	if len(rep.Damage) != 0 {
		t.Fatalf("damage: %v", rep.Damage)
	}
	m.equal(t, m2)
}

// TestCompactConcurrent runs engines on disjoint key ranges while
// compactions run, both automatic and explicit, so Snapshot races the
// engines' own updates and deletes. Replay must match the engines.
func TestCompactConcurrent(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 8 << 10, Sync: Never, syncFile: noSync, syncDir: noDirSync}
	m := newModel()
	j, _ := openModel(t, dir, opts, m)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	compacted := make(chan error, 1)
	go func() {
		var err error
		n := 0
		for err == nil {
			select {
			case <-stop:
				compacted <- nil
				return
			default:
			}
			err = j.Compact()
			n++
		}
		compacted <- err
	}()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker owns keys w, w+4, ...: model keys never collide.
			c := &churn{m: m, rng: rand.New(rand.NewPCG(uint64(w), 9)), next: uint64(w) << 40}
			for range 10_000 {
				c.step(200)
			}
			if err := c.last.Wait(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-compacted; err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newModel()
	j2, rep := openModel(t, dir, opts, m2)
	j2.Close()
	if len(rep.Damage) != 0 {
		t.Fatalf("damage: %v", rep.Damage)
	}
	m.equal(t, m2)
}

// TestCompactInterruptedRemoval stops compaction after each possible number
// of removed segments, as a crash would, and checks that no deleted job
// comes back and no live one is lost.
func TestCompactInterruptedRemoval(t *testing.T) {
	for stopAfter := 0; stopAfter < 6; stopAfter++ {
		dir := t.TempDir()
		opts := Options{SegmentSize: 2048, Sync: Never, NoAutoCompact: true}
		removed := 0
		opts.remove = func(path string) error {
			if removed == stopAfter {
				return errors.New("injected crash")
			}
			removed++
			return os.Remove(path)
		}
		m := newModel()
		j, _ := openModel(t, dir, opts, m)
		for k := range uint64(100) {
			m.put(k, bytes.Repeat([]byte{byte(k)}, 60), k)
		}
		for k := uint64(0); k < 100; k += 2 {
			m.del(k) // tombstones in later segments than the Fulls
		}
		for k := uint64(1); k < 100; k += 4 {
			m.update(k, 7)
		}
		err := j.Compact()
		if err == nil {
			t.Fatalf("stopAfter=%d: Compact succeeded", stopAfter)
		}
		j.Close()
		m2 := newModel()
		j2, rep := openModel(t, dir, Options{SegmentSize: 2048, Sync: Never, NoAutoCompact: true}, m2)
		if len(rep.Damage) != 0 {
			t.Fatalf("damage: %v", rep.Damage)
		}
		m.equal(t, m2)
		// A complete compaction afterwards, then replay again.
		if err := j2.Compact(); err != nil {
			t.Fatal(err)
		}
		j2.Close()
		m3 := newModel()
		j3, _ := openModel(t, dir, opts, m3)
		j3.Close()
		m.equal(t, m3)
	}
}

// TestCompactRewritesEachKeyOnce: an engine that writes a Full record on
// every change leaves many Fulls per key; compaction still writes each
// live key once.
func TestCompactRewritesEachKeyOnce(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 4096, Sync: Never, NoAutoCompact: true}
	m := newModel()
	j, _ := openModel(t, dir, opts, m)
	defer j.Close()
	for round := range 30 {
		for k := range uint64(20) {
			m.put(k, []byte("body"), uint64(round))
		}
	}
	m.del(3)
	if err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	st := j.Stats()
	if st.CopiedBytes != m.liveBytes() || st.LiveBytes != m.liveBytes() {
		t.Fatalf("compaction wrote %d bytes for %d live", st.CopiedBytes, m.liveBytes())
	}
	if st.Segments != 1 || st.Bytes != segmentHeaderSize+m.liveBytes() {
		t.Fatalf("after compaction %d segments, %d bytes", st.Segments, st.Bytes)
	}
}

// TestCompactOrphanUpdates: after compaction, an Update can survive while
// the Full it applied to is gone; a fresh Full after it carries the state,
// and replay must ignore the Update.
func TestCompactOrphanUpdates(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 1024, Sync: Never, NoAutoCompact: true}
	m := newModel()
	j, _ := openModel(t, dir, opts, m)
	m.put(1, make([]byte, 900), 0) // segment 1
	m.update(1, 5)                 // segment 1
	m.put(2, make([]byte, 900), 0) // segment 2, the head
	m.update(1, 6).Wait()          // segment 2
	// Compact without sealing the head: only segment 1 goes.
	if ran, err := j.compact(true, false); err != nil || !ran {
		t.Fatalf("compact = %v, %v", ran, err)
	}
	j.Close()
	var got []Record
	m2 := newModel()
	j2, _, err := Open(dir, Options{Logger: quietLogger}, func(r Record) error {
		got = append(got, Record{Key: r.Key, Kind: r.Kind})
		return m2.apply(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	j2.Close()
	want := []Record{{Key: 2, Kind: Full}, {Key: 1, Kind: Update}, {Key: 1, Kind: Full}}
	sameRecords(t, got, want)
	m.equal(t, m2)
}
