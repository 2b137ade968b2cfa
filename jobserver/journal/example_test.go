package journal_test

import (
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/jobgate/jobgate/jobserver/journal"
)

// engine is the smallest engine that uses the journal correctly: it appends
// under its lock, waits for durability after releasing it, replays by the
// rules of the package documentation, and snapshots for compaction.
type engine struct {
	mu   sync.Mutex
	jobs map[uint64]string
	j    *journal.Journal
}

// restore is the replay function.
func (e *engine) restore(r journal.Record) error {
	switch r.Kind {
	case journal.Full:
		e.jobs[r.Key] = string(r.Data) // copy: r.Data is reused
	case journal.Update:
		if _, ok := e.jobs[r.Key]; ok { // an Update without state is ignored
			e.jobs[r.Key] += string(r.Data)
		}
	case journal.Delete:
		delete(e.jobs, r.Key)
	}
	return nil
}

// snapshot is Options.Snapshot: called without journal locks held; puts
// the full state under the engine's lock.
func (e *engine) snapshot(key uint64, put func([]byte)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if body, ok := e.jobs[key]; ok {
		put([]byte(body))
	}
}

// change applies a change and journals it before acknowledging.
func (e *engine) change(r journal.Record, apply func()) error {
	e.mu.Lock()
	apply()
	t, err := e.j.AppendAsync(r) // under the lock: fixes the order
	e.mu.Unlock()
	if err != nil {
		return err
	}
	return t.Wait() // outside the lock: others append meanwhile
}

func Example() {
	dir, _ := os.MkdirTemp("", "journal-example")
	defer os.RemoveAll(dir)

	open := func() *engine {
		e := &engine{jobs: map[uint64]string{}}
		j, rep, err := journal.Open(dir, journal.Options{Sync: journal.Always, Snapshot: e.snapshot}, e.restore)
		if err != nil {
			panic(err)
		}
		fmt.Println("replayed", rep.Records, "records")
		e.j = j
		return e
	}

	e := open()
	e.change(journal.Record{Key: 1, Kind: journal.Full, Data: []byte("a")}, func() { e.jobs[1] = "a" })
	e.change(journal.Record{Key: 2, Kind: journal.Full, Data: []byte("b")}, func() { e.jobs[2] = "b" })
	e.change(journal.Record{Key: 1, Kind: journal.Update, Data: []byte("+")}, func() { e.jobs[1] += "+" })
	e.change(journal.Record{Key: 2, Kind: journal.Delete}, func() { delete(e.jobs, 2) })
	e.j.Compact() // rewrites job 1 in full, drops the rest
	e.j.Close()

	e = open()
	defer e.j.Close()
	var keys []uint64
	for k := range e.jobs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] })
	for _, k := range keys {
		fmt.Printf("job %d: %s\n", k, e.jobs[k])
	}
	// Output:
	// replayed 0 records
	// replayed 1 records
	// job 1: a+
}
