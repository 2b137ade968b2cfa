package journal

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestOnSyncSeesEveryFsync: the hook is called once per fsync that Stats
// counts, with a non-negative latency.
func TestOnSyncSeesEveryFsync(t *testing.T) {
	var calls atomic.Uint64
	var negative atomic.Bool
	j, _, err := Open(t.TempDir(), Options{Sync: Always, OnSync: func(d time.Duration) {
		calls.Add(1)
		if d < 0 {
			negative.Store(true)
		}
	}}, func(Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := j.Append(Record{Key: uint64(i + 1), Kind: Full, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	syncs := j.Stats().Syncs
	if syncs == 0 || calls.Load() != syncs {
		t.Errorf("OnSync called %d times for %d fsyncs", calls.Load(), syncs)
	}
	if negative.Load() {
		t.Error("negative fsync latency")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}
