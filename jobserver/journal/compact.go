package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"
)

// Compaction keeps the directory bounded by the live state without
// per-key bookkeeping in memory:
//
//  1. Victims are all sealed segments (every segment but the head), which
//     are always the oldest ones: the log only ever loses a prefix.
//  2. Compaction reads the victims' Full records. For each key it has not
//     yet handled in this run it calls Options.Snapshot, which appends a
//     fresh Full record of the key at the head if the key is live.
//  3. It fsyncs, so every fresh record is durable, then removes the
//     victims oldest first, fsyncing the directory after each removal.
//
// Why that is enough: a live key's state is its latest Full record plus
// the Updates after it, all in segments at or after the one holding that
// Full. If the Full is in a victim, step 2 rewrote the state at the head;
// if not, nothing the key needs is in a victim (its Updates come after its
// Full). Updates need no snapshot of their own: their Full is in an older
// segment, hence in a victim too. A Delete in a victim can go because no
// older segment survives to hold a record it would cancel; removing oldest
// first, each removal made durable before the next, keeps that true even
// if a crash interrupts the removals (a surviving Delete outlives the
// records it cancels, never the reverse). Records of dead keys are simply
// dropped.
//
// Snapshot appends under the engine's lock, so each fresh Full lands in
// the engine's own order of records for the key: an Update appended before
// it is already folded into it, one appended after it follows it.

// Compact runs a compaction now: it seals the head segment (when it holds
// records), rewrites the live state of every key found in the sealed
// segments at the head, and removes them. It needs Options.Snapshot. Do
// not call it while holding a lock Snapshot takes.
func (j *Journal) Compact() error {
	_, err := j.compact(true, true)
	return err
}

// runCompactor is the automatic compaction goroutine, woken by rotations.
func (j *Journal) runCompactor() {
	defer close(j.compactorDone)
	for {
		select {
		case <-j.stop:
			return
		case <-j.kick:
		}
		seen := j.kicksSent.Load()
		// Rotations during a run (the run's own writes cause some) can
		// make another run due at once.
		for {
			ran, err := j.compact(false, false)
			if err != nil {
				if !errors.Is(err, ErrClosed) {
					j.log.Error("journal: compaction failed", "dir", j.dir, "err", err)
				}
				break
			}
			if !ran {
				break
			}
		}
		j.kicksDone.Store(seen)
	}
}

// SettleCompaction waits until the background compactor has handled every
// segment rotation so far, so that the caller sees the directory at rest
// (a size measured while a compaction is under way is not what it leaves
// behind). It returns at once when automatic compaction is off, and after
// Close.
func (j *Journal) SettleCompaction() {
	sent := j.kicksSent.Load()
	for j.kicksDone.Load() < sent {
		select {
		case <-j.compactorDone:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// compactDueLocked reports whether sealed bytes of sealed segments call for
// an automatic compaction.
func (j *Journal) compactDueLocked(sealed int64) bool {
	limit := max(j.opts.CompactRatio*float64(j.lastLive), float64(j.opts.SegmentSize))
	return float64(sealed) >= limit
}

// putter is the put function compaction hands to Options.Snapshot.
type putter struct {
	j      *Journal
	key    uint64
	called bool
	bytes  int64 // total size of the Full records appended in this run
	err    error
}

func (p *putter) put(data []byte) {
	if p.called {
		return // contract: once per Snapshot call; a second state would be a duplicate
	}
	p.called = true
	if _, err := p.j.enqueue(Record{Key: p.key, Kind: Full, Data: data}, appendWake); err != nil {
		p.err = err
		return
	}
	p.bytes += frameSize(len(data))
}

// compact runs one compaction if force or if one is due; seal first seals
// the head so that everything appended so far is compacted. It reports
// whether it removed segments.
func (j *Journal) compact(force, seal bool) (bool, error) {
	if j.opts.Snapshot == nil {
		return false, ErrNoSnapshot
	}
	j.compactMu.Lock()
	defer j.compactMu.Unlock()

	j.mu.Lock()
	if err := j.usableLocked(); err != nil {
		j.mu.Unlock()
		return false, err
	}
	if seal && j.segs[len(j.segs)-1].size > segmentHeaderSize {
		j.rotateLocked()
	}
	head := j.segs[len(j.segs)-1].seq
	var victims []segment
	var sealed int64
	for _, s := range j.segs {
		if s.seq < head {
			victims = append(victims, s)
			sealed += s.size
		}
	}
	due := len(victims) > 0 && (force || j.compactDueLocked(sealed))
	j.mu.Unlock()
	if !due {
		return false, nil
	}

	// Every record assigned to a victim must be in its file before the
	// file is read.
	if err := j.Sync(); err != nil {
		return false, err
	}
	p := &putter{j: j}
	put := p.put
	done := make(map[uint64]struct{}) // keys rewritten in this run
	visit := func(r Record) error {
		if r.Kind != Full {
			return nil
		}
		if _, ok := done[r.Key]; ok {
			return nil
		}
		if j.closed.Load() {
			return ErrClosed
		}
		p.key, p.called = r.Key, false
		j.opts.Snapshot(r.Key, put)
		if p.err != nil {
			return p.err
		}
		if p.called {
			done[r.Key] = struct{}{}
		}
		return nil
	}
	var buf []byte
	for _, s := range victims {
		if s.readable <= segmentHeaderSize {
			continue // nothing readable: Open found the header bad
		}
		name := segmentName(s.seq)
		res, err := scanSegment(filepath.Join(j.dir, name), s.seq, s.readable, &buf, visit)
		if err != nil {
			return false, err
		}
		if res.damage != "" || res.end != s.readable {
			return false, fmt.Errorf("%w: %s at offset %d: %s (readable to %d); nothing removed",
				ErrCorrupt, name, res.end, res.damage, s.readable)
		}
	}
	// The fresh records must be on disk before the old ones go.
	if err := j.Sync(); err != nil {
		return false, err
	}

	var removed int64
	for _, s := range victims {
		path := filepath.Join(j.dir, segmentName(s.seq))
		if err := j.opts.remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed > 0, fmt.Errorf("journal: compaction: remove segment: %w", err)
		}
		if err := j.opts.syncDir(j.dir); err != nil {
			return removed > 0, fmt.Errorf("journal: compaction: %w", err)
		}
		j.mu.Lock()
		for i := range j.segs {
			if j.segs[i].seq == s.seq {
				j.segs = append(j.segs[:i], j.segs[i+1:]...)
				break
			}
		}
		j.compactedBytes += s.size
		j.mu.Unlock()
		removed += s.size
	}

	j.mu.Lock()
	j.lastLive = p.bytes
	j.compactions++
	j.copiedBytes += p.bytes
	j.mu.Unlock()
	j.log.Debug("journal: compacted", "dir", j.dir, "segments", len(victims),
		"removed_bytes", removed, "rewritten_bytes", p.bytes, "rewritten_keys", len(done))
	return true, nil
}

// waitCompaction returns once no compaction is running.
func (j *Journal) waitCompaction() {
	j.compactMu.Lock()
	defer j.compactMu.Unlock()
}
