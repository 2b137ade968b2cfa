package journal

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

// awaitDone waits for t without leading its write (Wait would write it
// itself), failing after a deadline.
func awaitDone(t *testing.T, tk Ticket) {
	t.Helper()
	select {
	case <-tk.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the record was not written 5 s after WriteQueued handed it on")
	}
	if err := tk.Wait(); err != nil {
		t.Fatal(err)
	}
}

// done reports whether Wait on t would not block.
func done(t Ticket) bool {
	select {
	case <-t.Done():
		return true
	default:
		return false
	}
}

// replayKeys reopens dir and returns the keys of its records, in order.
func replayKeys(t *testing.T, dir string) []uint64 {
	t.Helper()
	var keys []uint64
	j, _, err := Open(dir, Options{Logger: quietLogger}, func(r Record) error {
		keys = append(keys, r.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	return keys
}

// TestWriteQueuedInline: under the Never and Interval policies,
// WriteQueued writes what AppendQuiet queued before it returns, on the
// caller's goroutine, with no fsync, and the records are there after a
// reopen.
func TestWriteQueuedInline(t *testing.T) {
	for _, c := range []struct {
		name string
		sync SyncPolicy
	}{{"never", Never}, {"interval", Interval(time.Hour)}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var sc syncCounter
			j, _, err := Open(dir, Options{Sync: c.sync, Clock: clock.NewFake(time.Unix(0, 0)),
				Logger: quietLogger, syncFile: sc.sync}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sc.armed.Store(true)
			if j.WriteQueued() {
				t.Fatal("WriteQueued with nothing queued reported a write")
			}
			var ts []Ticket
			for k := range uint64(3) {
				tk, err := j.AppendQuiet(Record{Key: k, Kind: Full, Data: []byte("body")})
				if err != nil {
					t.Fatal(err)
				}
				ts = append(ts, tk)
			}
			writes := j.Stats().Writes
			if !j.WriteQueued() {
				t.Fatal("WriteQueued did not write")
			}
			for i, tk := range ts {
				if !done(tk) {
					t.Fatalf("ticket %d not done when WriteQueued returned", i)
				}
				if err := tk.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			if got := j.Stats().Writes - writes; got != 1 {
				t.Fatalf("%d writes for the three records, want one", got)
			}
			if n := sc.n.Load(); n != 0 {
				t.Fatalf("WriteQueued fsynced %d times", n)
			}
			j.Close()
			if keys := replayKeys(t, dir); len(keys) != 3 || keys[0] != 0 || keys[2] != 2 {
				t.Fatalf("replayed keys %v, want [0 1 2]", keys)
			}
		})
	}
}

// TestWriteQueuedLeavesFsyncs: where writing would fsync (the Always
// policy, or a record that starts a new segment, which seals the last
// one), WriteQueued leaves the records to the writer goroutine, which it
// wakes, and they become durable all the same.
func TestWriteQueuedLeavesFsyncs(t *testing.T) {
	t.Run("always", func(t *testing.T) {
		var sc syncCounter
		j, _, err := Open(t.TempDir(), Options{Sync: Always, Logger: quietLogger, syncFile: sc.sync}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		sc.armed.Store(true)
		tk, err := j.AppendQuiet(Record{Key: 1, Kind: Full})
		if err != nil {
			t.Fatal(err)
		}
		if j.WriteQueued() {
			t.Fatal("WriteQueued wrote under the Always policy")
		}
		awaitDone(t, tk)
		if n := sc.n.Load(); n != 1 {
			t.Fatalf("%d fsyncs, want 1", n)
		}
	})
	t.Run("new segment", func(t *testing.T) {
		dir := t.TempDir()
		j, _, err := Open(dir, Options{SegmentSize: MinSegmentSize, Sync: Never, Logger: quietLogger}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ts []Ticket
		wrote := 0
		for k := range uint64(40) { // 40 × 100 bytes: several segments
			tk, err := j.AppendQuiet(Record{Key: k, Kind: Full, Data: make([]byte, 100)})
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tk)
			if j.WriteQueued() {
				wrote++
			} else {
				awaitDone(t, tk) // the writer's turn: let it finish
			}
		}
		for _, tk := range ts {
			awaitDone(t, tk)
		}
		segs := j.Stats().Segments
		j.Close()
		if segs < 3 || wrote == 0 || wrote >= len(ts) {
			t.Fatalf("%d segments, %d of %d written inline: want several segments, some records written inline and the first of each new segment left to the writer", segs, wrote, len(ts))
		}
		if keys := replayKeys(t, dir); len(keys) != len(ts) {
			t.Fatalf("replayed %d records, want %d", len(keys), len(ts))
		}
	})
}

// TestQuietRecordsDoNotHoldOthers: records queued quietly never keep
// anyone else waiting for the event loop's WriteQueued: a Sync (the
// interval tick, compaction) or an Append from another goroutine that
// finds another writer busy is written when that writer is done, and
// AppendQuiet that finds the queue full hands it to the writer instead of
// waiting forever for room.
func TestQuietRecordsDoNotHoldOthers(t *testing.T) {
	t.Run("sync behind a busy writer", func(t *testing.T) {
		j, release := busyWriter(t, Interval(time.Hour))
		if _, err := j.AppendQuiet(Record{Key: 2, Kind: Full}); err != nil {
			t.Fatal(err)
		}
		synced := make(chan error, 1)
		go func() { synced <- j.Sync() }() // finds the writer busy
		appended := make(chan error, 1)
		go func() { appended <- j.Append(Record{Key: 3, Kind: Full}) }()
		release()
		for name, ch := range map[string]chan error{"Sync": synced, "Append": appended} {
			select {
			case err := <-ch:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s still waits 5 s after the busy writer finished: it waits for WriteQueued", name)
			}
		}
	})
	t.Run("full queue", func(t *testing.T) {
		j, _, err := Open(t.TempDir(), Options{Sync: Never, MaxPending: 4096, Logger: quietLogger}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		appended := make(chan error, 1)
		go func() {
			for k := range uint64(10) { // 10 KB through a 4 KB queue
				if _, err := j.AppendQuiet(Record{Key: k, Kind: Full, Data: make([]byte, 1000)}); err != nil {
					appended <- err
					return
				}
			}
			appended <- nil
		}()
		select {
		case err := <-appended:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("AppendQuiet waits for room in a full queue that only WriteQueued would write")
		}
		j.WriteQueued()
	})
}

// busyWriter opens a journal under policy and makes a Sync the busy
// writer: it holds the writer role, blocked in its fsync, until release is
// called.
func busyWriter(t *testing.T, policy SyncPolicy) (j *Journal, release func()) {
	t.Helper()
	entered := make(chan struct{}, 1)
	block := make(chan struct{})
	var armed, first atomic.Bool
	first.Store(true)
	j, _, err := Open(t.TempDir(), Options{Sync: policy, Clock: clock.NewFake(time.Unix(0, 0)),
		Logger: quietLogger, syncFile: func(f *os.File) error {
			if armed.Load() && first.Swap(false) {
				entered <- struct{}{}
				<-block
			}
			return f.Sync()
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	armed.Store(true)
	if _, err := j.AppendAsync(Record{Key: 1, Kind: Full}); err != nil {
		t.Fatal(err)
	}
	go j.Sync()
	<-entered
	release = sync.OnceFunc(func() { close(block) })
	t.Cleanup(release) // before Close, which waits for the writer
	return j, release
}

// TestQuietHandOffHolds: once WriteQueued or a waiting Sync has handed the
// queue to the writer goroutine, the loop's next AppendQuiet does not take
// it back: the writer writes everything queued as soon as the busy writer
// is done, with no further WriteQueued.
func TestQuietHandOffHolds(t *testing.T) {
	t.Run("WriteQueued behind a busy writer", func(t *testing.T) {
		j, release := busyWriter(t, Never)
		t1, err := j.AppendQuiet(Record{Key: 2, Kind: Full})
		if err != nil {
			t.Fatal(err)
		}
		if j.WriteQueued() {
			t.Fatal("WriteQueued wrote while another writer was busy")
		}
		t2, err := j.AppendQuiet(Record{Key: 3, Kind: Full}) // the loop's next batch
		if err != nil {
			t.Fatal(err)
		}
		release()
		awaitDone(t, t1)
		awaitDone(t, t2)
	})
	t.Run("Sync behind a busy writer", func(t *testing.T) {
		j, release := busyWriter(t, Never)
		if _, err := j.AppendQuiet(Record{Key: 2, Kind: Full}); err != nil {
			t.Fatal(err)
		}
		synced := make(chan error, 1)
		go func() { synced <- j.Sync() }() // the tick, or compaction
		// Wait until that Sync has handed the queue over, then queue more.
		deadline := time.Now().Add(5 * time.Second)
		for {
			j.mu.Lock()
			handed := j.handed
			j.mu.Unlock()
			if handed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the second Sync never handed the queue to the writer")
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := j.AppendQuiet(Record{Key: 3, Kind: Full}); err != nil {
			t.Fatal(err)
		}
		release()
		select {
		case err := <-synced:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Sync still waits 5 s after the busy writer finished: a later AppendQuiet took the hand-off back")
		}
	})
	t.Run("always", func(t *testing.T) {
		// Under the always policy nothing is ever written inline, so
		// AppendQuiet hands its records to the writer at once.
		j, _, err := Open(t.TempDir(), Options{Sync: Always, Logger: quietLogger}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		tk, err := j.AppendQuiet(Record{Key: 1, Kind: Full})
		if err != nil {
			t.Fatal(err)
		}
		awaitDone(t, tk)
	})
}

// TestWriteQueuedLeavesLargeWrites: a queue over inlineMax goes to the
// writer goroutine, so one write cannot stall the caller's event loop for
// long.
func TestWriteQueuedLeavesLargeWrites(t *testing.T) {
	j, _, err := Open(t.TempDir(), Options{Sync: Never, Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	tk, err := j.AppendQuiet(Record{Key: 1, Kind: Full, Data: make([]byte, inlineMax+1)})
	if err != nil {
		t.Fatal(err)
	}
	if j.WriteQueued() {
		t.Fatal("WriteQueued wrote a record larger than inlineMax inline")
	}
	awaitDone(t, tk)
	small, err := j.AppendQuiet(Record{Key: 2, Kind: Full, Data: make([]byte, 100)})
	if err != nil {
		t.Fatal(err)
	}
	if !j.WriteQueued() || !done(small) {
		t.Fatal("a small record after it was not written inline")
	}
}
