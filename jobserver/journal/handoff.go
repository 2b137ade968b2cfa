package journal

import (
	"slices"
	"sync"
)

// Handoff is a Journal plus the state replayed from it, kept until one
// engine takes it over (Attach); compaction is served from that state
// before, by the engine after. Both engines' FileJournal are one, with
// their own HandoffRules. All methods are safe for concurrent use.
type Handoff struct {
	j     *Journal
	rules HandoffRules

	mu       sync.Mutex
	live     map[uint64]replayed                     // guarded by mu; replayed state until Attach
	maxKey   uint64                                  // guarded by mu; the highest key of any replayed record
	snap     func(key uint64, put func(data []byte)) // guarded by mu; the engine's, after Attach
	attached bool                                    // guarded by mu
	restored int                                     // guarded by mu; keys handed to the engine, the counter aside
}

// HandoffRules is what an engine's records mean to a Handoff: the rest
// (Full replaces, Delete removes) is the same for every engine.
type HandoffRules struct {
	// ErrAttached is what a second Attach returns: one journal, one engine.
	ErrAttached error
	// Merge returns a key's Full record with an Update applied. The
	// Handoff keeps only a key's latest Update since its Full, so an
	// engine's Update must replace whatever its earlier ones carried. nil:
	// the engine writes no Update records, and one is ignored.
	Merge func(full, upd []byte) ([]byte, error)
	// Counter, if set, makes key 0 the engine's id counter: it returns the
	// record Attach restores first (nil: none) from the highest key of any
	// replayed record, deleted ones included, and key 0's replayed Full.
	Counter func(maxKey uint64, rec []byte) []byte
}

// replayed is a live key's latest Full record and latest Update since.
type replayed struct {
	full, upd []byte
}

// OpenHandoff opens (creating it if needed) the journal in dir and
// replays it into the Handoff. opts is passed to Open, except Snapshot,
// which the engine provides through Attach.
func OpenHandoff(dir string, opts Options, rules HandoffRules) (*Handoff, ReplayReport, error) {
	h := &Handoff{rules: rules, live: make(map[uint64]replayed)}
	opts.Snapshot = h.snapshot
	j, rep, err := Open(dir, opts, h.replay)
	if err != nil {
		return nil, rep, err
	}
	h.j = j
	return h, rep, nil
}

// replay applies one record by the rules of the package (doc.go). It runs
// inside OpenHandoff, before any other goroutine can see h.
func (h *Handoff) replay(r Record) error {
	h.maxKey = max(h.maxKey, r.Key)
	switch r.Kind {
	case Full:
		h.live[r.Key] = replayed{full: append([]byte(nil), r.Data...)} // r.Data is reused
	case Update:
		if s, ok := h.live[r.Key]; ok && h.rules.Merge != nil {
			s.upd = append(s.upd[:0], r.Data...)
			h.live[r.Key] = s
		}
	case Delete:
		delete(h.live, r.Key)
	}
	return nil
}

// merged returns s's Full record with its Update applied.
func (h *Handoff) merged(s replayed) ([]byte, error) {
	if s.upd == nil {
		return s.full, nil
	}
	return h.rules.Merge(s.full, s.upd)
}

// Attach hands the replayed state to the engine, once: restore gets the
// counter, then every live key in ascending order with its Update merged,
// and may keep data; then snapshot serves compaction (Options.Snapshot).
// An error from restore is returned; the keys restored before it are gone.
func (h *Handoff) Attach(restore func(key uint64, data []byte) error, snapshot func(key uint64, put func(data []byte))) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.attached {
		return h.rules.ErrAttached
	}
	if h.rules.Counter != nil {
		if c := h.rules.Counter(h.maxKey, h.live[0].full); c != nil {
			if err := restore(0, c); err != nil {
				return err
			}
		}
		delete(h.live, 0)
	}
	// Ascending: the Gearman engine queues restored jobs in handle order,
	// and the Beanstalk job table retires a page (its trace slots, its
	// emptiness) when a higher page starts, as ids only rise.
	keys := make([]uint64, 0, len(h.live))
	for k := range h.live {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		d, err := h.merged(h.live[k])
		if err == nil {
			err = restore(k, d)
		}
		if err != nil {
			return err
		}
		delete(h.live, k) // let the engine's copy be the only one
		h.restored++
	}
	h.live = nil
	h.snap = snapshot
	h.attached = true
	return nil
}

// snapshot is the journal's compaction callback: the engine's once
// attached, the replayed state before (a compaction cannot run before
// anything is appended, but if one did it must not lose a job).
func (h *Handoff) snapshot(key uint64, put func(data []byte)) {
	h.mu.Lock()
	if f := h.snap; f != nil {
		h.mu.Unlock()
		f(key, put)
		return
	}
	defer h.mu.Unlock()
	if s, ok := h.live[key]; ok {
		if d, err := h.merged(s); err == nil {
			put(d)
		}
	}
}

// Restored returns the number of keys Attach restored, the counter aside.
func (h *Handoff) Restored() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.restored
}

// Journal returns the underlying journal, for appends, Stats and Compact.
func (h *Handoff) Journal() *Journal { return h.j }

// WriteQueued writes what is queued on the caller's goroutine when it
// needs no fsync (Journal.WriteQueued).
func (h *Handoff) WriteQueued() bool { return h.j.WriteQueued() }

// Close flushes, fsyncs and closes the journal (Journal.Close).
func (h *Handoff) Close() error { return h.j.Close() }
