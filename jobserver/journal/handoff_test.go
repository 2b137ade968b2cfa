package journal

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var errTestAttached = errors.New("test: already attached")

// testRules merge an Update by appending it to the Full record and keep
// the counter as "c<n>" under key 0.
var testRules = HandoffRules{
	ErrAttached: errTestAttached,
	Merge: func(full, upd []byte) ([]byte, error) {
		if string(upd) == "bad" {
			return nil, errors.New("bad update")
		}
		return fmt.Appendf(nil, "%s+%s", full, upd), nil
	},
	Counter: func(maxKey uint64, rec []byte) []byte {
		if n, err := strconv.ParseUint(strings.TrimPrefix(string(rec), "c"), 10, 64); err == nil {
			maxKey = max(maxKey, n)
		}
		return fmt.Appendf(nil, "c%d", maxKey)
	},
}

// writeHandoffLog writes a log in which keys 1, 2 (updated twice) and 7
// are live, 3 was deleted, 9 got an Update without a Full, and the counter
// says 5.
func writeHandoffLog(t *testing.T, dir string) {
	t.Helper()
	j, _, err := Open(dir, Options{Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{
		{Key: 0, Kind: Full, Data: []byte("c5")},
		{Key: 1, Kind: Full, Data: []byte("a")},
		{Key: 2, Kind: Full, Data: []byte("b")},
		{Key: 2, Kind: Update, Data: []byte("u1")},
		{Key: 3, Kind: Full, Data: []byte("d")},
		{Key: 2, Kind: Update, Data: []byte("u2")},
		{Key: 3, Kind: Delete},
		{Key: 9, Kind: Update, Data: []byte("x")},
		{Key: 7, Kind: Full, Data: []byte("g")},
	} {
		mustAppend(t, j, r)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// liveFulls replays a copy of the segments in dir (which an open
// journal locks) and returns each key's latest Full record.
func liveFulls(t *testing.T, dir string) map[uint64]string {
	t.Helper()
	cp := t.TempDir()
	for _, path := range segmentFiles(t, dir) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, filepath.Base(path)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recs, _ := collect(t, cp, Options{})
	got := make(map[uint64]string)
	for _, r := range recs {
		switch r.Kind {
		case Full:
			got[r.Key] = string(r.Data)
		case Delete:
			delete(got, r.Key)
		}
	}
	return got
}

type restoredRec struct {
	key  uint64
	data string
}

// openTestHandoff writes the test log (writeHandoffLog) to a new
// directory and opens it with rules; the Handoff is closed at the end of
// the test.
func openTestHandoff(t *testing.T, rules HandoffRules) (*Handoff, string) {
	t.Helper()
	dir := t.TempDir()
	writeHandoffLog(t, dir)
	h, _, err := OpenHandoff(dir, Options{Logger: quietLogger}, rules)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, dir
}

// attachAll attaches h with snapshot and checks that it restored want, in
// that order, and counts restored keys.
func attachAll(t *testing.T, h *Handoff, snapshot func(uint64, func([]byte)), want []restoredRec, restored int) {
	t.Helper()
	var got []restoredRec
	err := h.Attach(func(key uint64, data []byte) error {
		got = append(got, restoredRec{key, string(data)})
		return nil
	}, snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
	if n := h.Restored(); n != restored {
		t.Fatalf("Restored() = %d, want %d", n, restored)
	}
}

func TestHandoffReplayAttach(t *testing.T) {
	h, dir := openTestHandoff(t, testRules)
	if n := h.Restored(); n != 0 {
		t.Fatalf("Restored() before Attach = %d, want 0", n)
	}

	// Before Attach compaction is served from the replayed state, the
	// Update merged and key 9 (no Full) left out.
	if err := h.Journal().Compact(); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{0: "c5", 1: "a", 2: "b+u2", 7: "g"}
	if got := liveFulls(t, dir); !maps.Equal(got, want) {
		t.Fatalf("after a compaction before Attach: %v, want %v", got, want)
	}

	// The counter first, past the highest key the log mentions (9), then
	// the live keys in ascending order.
	var snapped []uint64
	attachAll(t, h, func(key uint64, put func([]byte)) {
		snapped = append(snapped, key)
		put(fmt.Appendf(nil, "engine%d", key))
	}, []restoredRec{{0, "c9"}, {1, "a"}, {2, "b+u2"}, {7, "g"}}, 3)
	if err := h.Attach(func(uint64, []byte) error { return nil }, nil); !errors.Is(err, errTestAttached) {
		t.Fatalf("second Attach: %v, want %v", err, errTestAttached)
	}

	// After Attach compaction asks the engine.
	if err := h.Journal().Compact(); err != nil {
		t.Fatal(err)
	}
	if len(snapped) != 4 {
		t.Fatalf("engine snapshot called for %v, want keys 0, 1, 2 and 7", snapped)
	}
	want = map[uint64]string{0: "engine0", 1: "engine1", 2: "engine2", 7: "engine7"}
	if got := liveFulls(t, dir); !maps.Equal(got, want) {
		t.Fatalf("after a compaction after Attach: %v, want %v", got, want)
	}
}

func TestHandoffAttachError(t *testing.T) {
	h, _ := openTestHandoff(t, testRules)
	errRestore := errors.New("restore failed")
	err := h.Attach(func(key uint64, _ []byte) error {
		if key == 2 {
			return errRestore
		}
		return nil
	}, nil)
	if !errors.Is(err, errRestore) {
		t.Fatalf("Attach: %v, want %v", err, errRestore)
	}
	if n := h.Restored(); n != 1 {
		t.Fatalf("Restored() = %d, want 1 (key 1)", n)
	}
	// Not attached: a retry gets the counter again and the keys not yet
	// restored.
	var keys []uint64
	if err := h.Attach(func(key uint64, _ []byte) error { keys = append(keys, key); return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys) != "[0 2 7]" {
		t.Fatalf("retry restored keys %v, want [0 2 7]", keys)
	}
}

func TestHandoffNoMergeNoCounter(t *testing.T) {
	h, _ := openTestHandoff(t, HandoffRules{ErrAttached: errTestAttached})
	// Updates are ignored and key 0 is an ordinary key.
	attachAll(t, h, nil, []restoredRec{{0, "c5"}, {1, "a"}, {2, "b"}, {7, "g"}}, 4)
}

func TestHandoffMergeError(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, Options{Logger: quietLogger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, j, Record{Key: 1, Kind: Full, Data: []byte("a")})
	mustAppend(t, j, Record{Key: 1, Kind: Update, Data: []byte("bad")})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	h, _, err := OpenHandoff(dir, Options{Logger: quietLogger}, testRules)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Attach(func(uint64, []byte) error { return nil }, nil); err == nil || err.Error() != "bad update" {
		t.Fatalf("Attach: %v, want the merge error", err)
	}
}
