package beanstalk

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// TestAllocsPerCommand holds the engine to its budget: put allocates the
// job and its body copy, nothing else allocates.
func TestAllocsPerCommand(t *testing.T) {
	e, _ := newTestEngine(t)
	s := e.NewSession(nil)
	defer s.Close()
	body := make([]byte, 100)
	put := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: body}
	res := wire.Command{Verb: wire.Reserve}
	var r wire.Reply
	for range 100 { // warm the map and heaps
		s.Exec(&put, &r)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		s.Exec(&put, &r)
		s.Exec(&res, &r)
		del := wire.Command{Verb: wire.Delete, ID: r.ID}
		s.Exec(&del, &r)
	})
	if allocs > 2 {
		t.Fatalf("put+reserve+delete allocates %.1f times, want <= 2", allocs)
	}
	stats := wire.Command{Verb: wire.Stats}
	s.Exec(&stats, &r)
	if a := testing.AllocsPerRun(100, func() { s.Exec(&stats, &r) }); a > 0 {
		t.Fatalf("stats allocates %.1f times", a)
	}
}

// TestConcurrentSessions runs producers and blocking consumers on the real
// clock under the race detector; every job must be consumed exactly once.
func TestConcurrentSessions(t *testing.T) {
	e := mustNew(Config{Clock: clock.Real{}, System: &testSystem})
	defer e.Close()
	const producers, consumers, perProducer = 4, 4, 500
	total := producers * perProducer
	seen := make([]int32, total+1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := e.NewSession(nil)
			defer s.Close()
			var r wire.Reply
			for range perProducer {
				cmd := wire.Command{Verb: wire.Put, TTR: 60, Body: []byte("job")}
				s.Exec(&cmd, &r)
			}
		}()
	}
	consumed := make(chan struct{}, total)
	done := make(chan struct{})
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wake := make(chan struct{}, 1)
			s := e.NewSession(func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
			defer s.Close()
			var r wire.Reply
			for {
				cmd := wire.Command{Verb: wire.Reserve}
				if !s.Exec(&cmd, &r) {
					select {
					case <-wake:
					case <-done:
						s.Cancel()
					}
					if !s.Result(&r) {
						t.Error("no result after notify or cancel")
						return
					}
				}
				if r.Kind != wire.Reserved {
					return // cancelled at the end
				}
				mu.Lock()
				seen[r.ID]++
				mu.Unlock()
				del := wire.Command{Verb: wire.Delete, ID: r.ID}
				s.Exec(&del, &r)
				if r.Kind != wire.Deleted {
					t.Errorf("delete: kind %d", r.Kind)
				}
				consumed <- struct{}{}
			}
		}()
	}
	deadline := time.After(30 * time.Second)
	for range total {
		select {
		case <-consumed:
		case <-deadline:
			t.Fatal("jobs not consumed in 30 s")
		}
	}
	close(done)
	wg.Wait()
	for id := 1; id <= total; id++ {
		if seen[id] != 1 {
			t.Fatalf("job %d consumed %d times", id, seen[id])
		}
	}
}

func BenchmarkPutReserveDelete(b *testing.B) {
	e := mustNew(Config{Clock: clock.Real{}, System: &testSystem})
	defer e.Close()
	s := e.NewSession(nil)
	defer s.Close()
	body := make([]byte, 100)
	put := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: body}
	res := wire.Command{Verb: wire.Reserve}
	var r wire.Reply
	b.ReportAllocs()
	for b.Loop() {
		s.Exec(&put, &r)
		s.Exec(&res, &r)
		del := wire.Command{Verb: wire.Delete, ID: r.ID}
		s.Exec(&del, &r)
	}
}

// BenchmarkPut measures put into a growing queue (map and heap growth
// included), the producer side of a backlog.
func BenchmarkPut(b *testing.B) {
	e := mustNew(Config{Clock: clock.Real{}, System: &testSystem})
	defer e.Close()
	s := e.NewSession(nil)
	defer s.Close()
	put := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: make([]byte, 100)}
	var r wire.Reply
	b.ReportAllocs()
	for b.Loop() {
		s.Exec(&put, &r)
	}
}

// BenchmarkParallelCycle runs put→reserve→delete from many sessions at
// once: the cost of the engine lock under contention.
func BenchmarkParallelCycle(b *testing.B) {
	e := mustNew(Config{Clock: clock.Real{}, System: &testSystem})
	defer e.Close()
	body := make([]byte, 100)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := e.NewSession(nil)
		defer s.Close()
		put := wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: body}
		res := wire.Command{Verb: wire.ReserveWithTimeout}
		var r wire.Reply
		for pb.Next() {
			s.Exec(&put, &r)
			s.Exec(&res, &r)
			if r.Kind == wire.Reserved {
				del := wire.Command{Verb: wire.Delete, ID: r.ID}
				s.Exec(&del, &r)
			}
		}
	})
}

// BenchmarkJournalReplay1M measures a restart on a journal of 1,000,000
// live jobs (100-byte bodies): OpenJournal's replay plus New's restore.
// Run it with -benchtime=1x; it reports the replay time per job too.
func BenchmarkJournalReplay1M(b *testing.B) {
	const n = 1_000_000
	dir := b.TempDir()
	opts := journal.Options{Sync: journal.Never, Logger: quietLog}
	// Write the records directly: putting a million jobs through sessions
	// would measure the write path, not the replay.
	jr, _, err := journal.Open(filepath.Join(dir, JournalDir), opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	enc := mustNew(Config{Clock: clock.NewFake(testStart), System: &testSystem})
	j := &job{pri: 100, ttr: 60, tube: enc.defaultTube, body: make([]byte, 100), idx: -1}
	var buf []byte
	for id := uint64(1); id <= n; id++ {
		j.id = id
		j.state = stateReady
		buf = enc.appendJobRecord(buf[:0], j)
		if _, err := jr.AppendAsync(journal.Record{Key: id, Kind: journal.Full, Data: buf}); err != nil {
			b.Fatal(err)
		}
	}
	if err := jr.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		fj, rep, err := OpenJournal(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		e, err := New(Config{Clock: clock.NewFake(testStart), System: &testSystem, Journal: fj})
		if err != nil {
			b.Fatal(err)
		}
		if got := e.Restored(); got != n {
			b.Fatalf("restored %d jobs, want %d (%+v)", got, n, rep)
		}
		b.StopTimer()
		e.Close()
		fj.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/job")
}
