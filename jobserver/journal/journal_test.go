package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

func TestRoundTrip(t *testing.T) {
	for _, pol := range []SyncPolicy{Always, Interval(time.Millisecond), Never} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Sync: pol, Logger: quietLogger}
			j, rep, err := Open(dir, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Records != 0 || len(rep.Damage) != 0 {
				t.Fatalf("fresh dir report = %+v", rep)
			}
			var want []Record
			for i := range 100 {
				r := testRecord(i)
				want = append(want, r)
				if err := j.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			got, rep := collect(t, dir, opts)
			sameRecords(t, got, want)
			if rep.Records != 100 || rep.Segments != 1 || len(rep.Damage) != 0 {
				t.Fatalf("report = %+v", rep)
			}

			// Appends continue after a reopen, in order.
			j, _, err = Open(dir, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 100; i < 150; i++ {
				r := testRecord(i)
				want = append(want, r)
				if err := j.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ = collect(t, dir, opts)
			sameRecords(t, got, want)
		})
	}
}

func TestAppendCopiesData(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, Options{Sync: Never, Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("first")
	tk, err := j.AppendAsync(Record{Key: 1, Kind: Full, Data: buf})
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX") // the caller may reuse its buffer at once
	if err := tk.Wait(); err != nil {
		t.Fatal(err)
	}
	<-tk.Done()
	j.Close()
	got, _ := collect(t, dir, Options{})
	if string(got[0].Data) != "first" {
		t.Fatalf("data = %q", got[0].Data)
	}
}

func TestAppendValidation(t *testing.T) {
	j, _, err := Open(t.TempDir(), Options{MaxRecordSize: 10, Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(Record{Key: 1, Kind: 0}); !errors.Is(err, ErrBadKind) {
		t.Fatalf("kind 0: %v", err)
	}
	if err := j.Append(Record{Key: 1, Kind: 9}); !errors.Is(err, ErrBadKind) {
		t.Fatalf("kind 9: %v", err)
	}
	if err := j.Append(Record{Key: 1, Kind: Full, Data: make([]byte, 11)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("11 bytes: %v", err)
	}
	if err := j.Append(Record{Key: 1, Kind: Full, Data: make([]byte, 10)}); err != nil {
		t.Fatalf("10 bytes: %v", err)
	}
	if err := j.Compact(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("Compact without Snapshot: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{
		{SegmentSize: 100},
		{CompactRatio: 1},
		{MaxRecordSize: -1},
		{MaxPending: -1},
	} {
		if _, _, err := Open(t.TempDir(), o, nil); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

func TestClosed(t *testing.T) {
	j, _, err := Open(t.TempDir(), Options{Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Record{Key: 1, Kind: Full}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := j.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if err := j.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestGroupCommit holds the first fsync until all appenders have queued
// their records, so the rest must share one write and one fsync: no
// timing involved.
func TestGroupCommit(t *testing.T) {
	const n = 64
	dir := t.TempDir()
	var j *Journal
	var mu sync.Mutex
	var calls int
	release := make(chan struct{})
	opts := Options{Sync: Always, Logger: quietLogger}
	opts.syncFile = func(f *os.File) error {
		mu.Lock()
		calls++
		first := calls == 2 // call 1 is the new segment's header at Open
		mu.Unlock()
		if first {
			<-release
		}
		return f.Sync()
	}
	j, _, err := Open(dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- j.Append(Record{Key: uint64(i), Kind: Full, Data: []byte(strconv.Itoa(i))})
		}()
	}
	waitFor(t, "all appends queued", func() bool { return j.Stats().Appends == n })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := j.Stats()
	mu.Lock()
	dataSyncs := calls - 1
	mu.Unlock()
	if dataSyncs != 2 || st.Writes != 2 {
		t.Fatalf("%d appends took %d fsyncs and %d writes, want 2 and 2", n, dataSyncs, st.Writes)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := collect(t, dir, Options{})
	seen := map[uint64]bool{}
	for _, r := range got {
		if seen[r.Key] || string(r.Data) != strconv.Itoa(int(r.Key)) {
			t.Fatalf("bad or duplicate record %+v", r)
		}
		seen[r.Key] = true
	}
	if len(seen) != n {
		t.Fatalf("replayed %d records, want %d", len(seen), n)
	}
}

// TestGroupCommitConcurrent is the unforced version: many writers, the
// Always policy; every Append is acknowledged, each record is replayed
// once, and fsyncs never exceed appends.
func TestGroupCommitConcurrent(t *testing.T) {
	const writers, each = 16, 200
	dir := t.TempDir()
	var sc syncCounter
	opts := Options{Sync: Always, Logger: quietLogger, syncFile: sc.sync}
	j, _, err := Open(dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc.armed.Store(true)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := j.Append(Record{Key: uint64(w*each + i), Kind: Full, Data: []byte("x")}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := sc.n.Load(); got > writers*each || got == 0 {
		t.Fatalf("%d appends took %d fsyncs", writers*each, got)
	}
	t.Logf("%d appends from %d writers: %d fsyncs", writers*each, writers, sc.n.Load())
	j.Close()
	got, _ := collect(t, dir, Options{})
	if len(got) != writers*each {
		t.Fatalf("replayed %d, want %d", len(got), writers*each)
	}
	seen := map[uint64]bool{}
	for _, r := range got {
		if seen[r.Key] {
			t.Fatalf("key %d twice", r.Key)
		}
		seen[r.Key] = true
	}
}

func TestSyncPolicies(t *testing.T) {
	t.Run("always", func(t *testing.T) {
		var sc syncCounter
		j, _, err := Open(t.TempDir(), Options{Sync: Always, Logger: quietLogger, syncFile: sc.sync}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc.armed.Store(true)
		for i := range 5 {
			mustAppend(t, j, Record{Key: uint64(i), Kind: Full})
			if got := sc.n.Load(); got != int64(i+1) {
				t.Fatalf("after %d sequential appends: %d fsyncs", i+1, got)
			}
		}
		j.Close()
		if got := sc.n.Load(); got != 5 {
			t.Fatalf("Close with nothing unsynced fsynced: %d", got)
		}
	})
	t.Run("never", func(t *testing.T) {
		var sc syncCounter
		j, _, err := Open(t.TempDir(), Options{Sync: Never, Logger: quietLogger, syncFile: sc.sync}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc.armed.Store(true)
		for i := range 5 {
			mustAppend(t, j, Record{Key: uint64(i), Kind: Full})
		}
		if got := sc.n.Load(); got != 0 {
			t.Fatalf("Never fsynced %d times", got)
		}
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := sc.n.Load(); got != 1 {
			t.Fatalf("Sync: %d fsyncs", got)
		}
		j.Sync() // nothing new: no fsync
		mustAppend(t, j, Record{Key: 9, Kind: Delete})
		j.Close() // flushes the unsynced record
		if got := sc.n.Load(); got != 2 {
			t.Fatalf("after Close: %d fsyncs, want 2", got)
		}
	})
	t.Run("interval", func(t *testing.T) {
		var sc syncCounter
		clk := clock.NewFake(time.Unix(0, 0))
		j, _, err := Open(t.TempDir(), Options{Sync: Interval(50 * time.Millisecond), Clock: clk,
			Logger: quietLogger, syncFile: sc.sync}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc.armed.Store(true)
		for i := range 5 {
			mustAppend(t, j, Record{Key: uint64(i), Kind: Full})
		}
		if got := sc.n.Load(); got != 0 {
			t.Fatalf("fsynced %d times before the interval", got)
		}
		clk.Advance(49 * time.Millisecond)
		if got := sc.n.Load(); got != 0 {
			t.Fatalf("fsynced %d times before the interval", got)
		}
		clk.Advance(time.Millisecond) // the tick fsyncs before Advance returns
		if got := sc.n.Load(); got != 1 {
			t.Fatalf("after one interval: %d fsyncs, want 1", got)
		}
		clk.Advance(50 * time.Millisecond) // nothing new written
		if got := sc.n.Load(); got != 1 {
			t.Fatalf("idle interval fsynced: %d", got)
		}
		mustAppend(t, j, Record{Key: 9, Kind: Full})
		clk.Advance(50 * time.Millisecond)
		if got := sc.n.Load(); got != 2 {
			t.Fatalf("after second interval: %d fsyncs, want 2", got)
		}
		if clk.Pending() != 1 {
			t.Fatalf("%d timers pending, want the next tick", clk.Pending())
		}
		j.Close()
		if clk.Pending() != 0 {
			t.Fatalf("Close left %d timers", clk.Pending())
		}
	})
	if Always.String() != "always" || Never.String() != "never" || (SyncPolicy{}).String() != "interval(50ms)" {
		t.Fatal("SyncPolicy.String")
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 1024, Sync: Never, Logger: quietLogger}
	j, _, err := Open(dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []Record
	for i := range 300 {
		r := Record{Key: uint64(i), Kind: Full, Data: make([]byte, 50+i%60)}
		want = append(want, r)
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	big := Record{Key: 1000, Kind: Full, Data: make([]byte, 3000)} // larger than a segment
	want = append(want, big)
	if err := j.Append(big); err != nil {
		t.Fatal(err)
	}
	st := j.Stats()
	j.Close()
	files := segmentFiles(t, dir)
	if len(files) < 20 || len(files) != st.Segments {
		t.Fatalf("%d segment files, Stats says %d", len(files), st.Segments)
	}
	var total int64
	for i, f := range files {
		fi, _ := os.Stat(f)
		total += fi.Size()
		if fi.Size() > 1024 && i != len(files)-1 {
			t.Fatalf("%s is %d bytes, over the segment size", f, fi.Size())
		}
	}
	if total != st.Bytes {
		t.Fatalf("files hold %d bytes, Stats says %d", total, st.Bytes)
	}
	got, rep := collect(t, dir, opts)
	sameRecords(t, got, want)
	if rep.Segments != len(files) || rep.Bytes != total {
		t.Fatalf("report %+v", rep)
	}
}

func TestLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, Options{Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(dir, Options{Logger: quietLogger}, nil)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q names neither the directory nor the holder", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, _, err := Open(dir, Options{Logger: quietLogger}, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	j2.Close()
}

func TestFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	var fail atomic.Bool
	opts := Options{Sync: Always, Logger: quietLogger}
	opts.syncFile = func(f *os.File) error {
		if fail.Load() {
			return errors.New("injected EIO")
		}
		return f.Sync()
	}
	j, _, err := Open(dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Record{Key: 1, Kind: Full}); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := j.Append(Record{Key: 2, Kind: Full}); !errors.Is(err, ErrFailed) {
		t.Fatalf("append with failing fsync: %v", err)
	}
	fail.Store(false)
	if err := j.Append(Record{Key: 3, Kind: Full}); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	if st := j.Stats(); !errors.Is(st.Err, ErrFailed) {
		t.Fatalf("Stats.Err = %v", st.Err)
	}
	if err := j.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close = %v", err)
	}
	got, _ := collect(t, dir, Options{})
	if len(got) < 1 || got[0].Key != 1 || len(got) > 2 {
		t.Fatalf("after failure replayed %+v", got)
	}
}

func TestBackpressure(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, Options{Sync: Never, MaxPending: 256, Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				tk, err := j.AppendAsync(Record{Key: uint64(w*1000 + i), Kind: Full, Data: make([]byte, 100)})
				if err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					tk.Wait()
				}
			}
		}()
	}
	wg.Wait()
	// A record bigger than MaxPending goes through alone.
	if err := j.Append(Record{Key: 1, Kind: Full, Data: make([]byte, 1000)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	got, _ := collect(t, dir, Options{})
	if len(got) != 801 {
		t.Fatalf("replayed %d, want 801", len(got))
	}
}

func TestReplayError(t *testing.T) {
	dir := t.TempDir()
	j, _, _ := Open(dir, Options{Logger: quietLogger}, nil)
	mustAppend(t, j, Record{Key: 1, Kind: Full})
	j.Close()
	boom := errors.New("boom")
	_, _, err := Open(dir, Options{Logger: quietLogger}, func(Record) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Open = %v", err)
	}
	// The failed Open released the lock.
	j, _, err = Open(dir, Options{Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
}

func TestIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "README"), []byte("hi"), 0o644)
	os.WriteFile(filepath.Join(dir, "zz.jnl"), []byte("hi"), 0o644)
	got, rep := collect(t, dir, Options{})
	if len(got) != 0 || len(rep.Damage) != 0 {
		t.Fatalf("got %v %+v", got, rep)
	}
}
