// Package journal is the durable, append-only log the local engines write
// before they acknowledge a change to a job (DESIGN.md, decision 8). It
// knows nothing of engines or codecs: it stores records of opaque bytes
// keyed by a uint64 job key.
//
// # Use
//
//	j, rep, err := journal.Open(dir, journal.Options{
//		Sync:     journal.Interval(50 * time.Millisecond),
//		Snapshot: eng.snapshot, // see Compaction
//	}, eng.restore)            // replay: called for every record, in order
//	...
//	// in the engine, under its lock, so that the order of its records is
//	// the order of its state changes:
//	t, err := j.AppendAsync(journal.Record{Key: id, Kind: journal.Update, Data: buf})
//	eng.mu.Unlock()
//	err = t.Wait() // then acknowledge to the client
//
// # Records
//
// A Record is (Key, Kind, Data). The engine chooses what Data holds; the
// journal only promises to give it back byte for byte, in order:
//
//   - Full: the whole state of the key (body, priority, tube or function,
//     delay...). Write one when a job is created; writing one instead of an
//     Update is always allowed.
//   - Update: a change to the state (release with a new priority or delay,
//     bury, kick, touch...). Cheaper than a Full for a large body.
//   - Delete: the key is gone (delete, or a background job completed).
//
// Reserved or running jobs need no record: they come back ready on replay.
//
// # Replay
//
// Open reads every segment, oldest first, and calls replay for each good
// record in the order it was appended. The engine keeps one state per key
// and applies:
//
//	Full(k, d)   state[k] = d               (replacing any earlier state)
//	Update(k, d) if k has a state: state[k] = apply(state[k], d); else ignore
//	Delete(k)    drop state[k] if any
//
// The live jobs are the keys with a state at the end. Ignoring an Update or
// Delete for a key without a state is required, not a courtesy: after a
// compaction such records can survive without the Full before them (see
// below), and they are always either followed by a newer Full of the key
// or belong to a key that was dead anyway.
//
// Handoff does that for an engine: OpenHandoff replays into a map of live
// records, and Attach hands them to the engine once (its id counter first,
// then in key order); HandoffRules says how the engine's Update applies.
// Both engines' FileJournal are one.
//
// # Damage
//
// Each record carries a CRC-32C over its length, kind, key and data. A
// segment is read up to its first frame that is torn (the file ends inside
// it), has an impossible kind or length, or fails its checksum.
//
//   - In the newest segment that is the expected result of a crash in the
//     middle of a write: Open truncates the segment after the last good
//     record, fsyncs, reports it in ReplayReport.Damage (Truncated) and
//     logs a warning; appends continue from there. Under the Always policy
//     a torn write holds only records not yet acknowledged. (Bit rot inside
//     the newest segment is handled the same way and loses the records
//     after it; Damage.Lost says how many bytes.)
//   - In an older segment (bit rot, a bad disk, a hand-edited file) the
//     rest of that segment is unreadable, since frames have no sync marks.
//     Open reports it (not Truncated), leaves the file as it is, and goes on
//     with the later segments: losing the later, intact records would be
//     worse than replaying a job whose Delete was in the unreadable part,
//     and a job queue already promises at-least-once delivery. Compaction
//     later removes the damaged file like any other (after rewriting the
//     live keys of its readable part).
//   - A gap in the segment numbers (a file removed by hand; compaction
//     only ever removes the oldest) is reported too.
//
// Two things are not damage but errors, because no crash produces them and
// guessing would destroy data: a segment in another format version
// (ErrFormat: a newer jobgate wrote it) and a newest segment whose header
// is complete but wrong (ErrForeign: a file copied or renamed in). A
// newest segment whose header is short or zeros is a crash while it was
// being created, and is reset.
//
// Damage is never an Open error; I/O errors and errors from replay are.
//
// # Durability
//
// Records are written in the order they were appended, one write call per
// group of concurrent appends and, under the Always policy, one fsync per
// group (group commit): Append returns only after the fsync that covers
// its record. Interval(d) acknowledges after the write and fsyncs every d;
// Never acknowledges after the write and leaves flushing to the kernel.
// Whatever the policy, sealing a segment fsyncs it, creating one fsyncs the
// file and the directory, and Sync, compaction and Close fsync.
//
// A write or fsync error fails the journal for good (ErrFailed): after a
// failed fsync the kernel may have dropped the dirty pages, so no later
// write could be trusted to follow the ones before. The engine should stop
// acknowledging; a restart repairs the tail.
//
// # Compaction
//
// The log is a series of segment files of about Options.SegmentSize. Disk
// use is bounded by the live state, without per-key memory: when the sealed
// segments exceed Options.CompactRatio times the live state measured by
// the previous compaction (and at least one segment), a background
// goroutine compacts all of them. It reads their Full records and, for
// each key, calls Options.Snapshot(key, put); the engine calls put with the
// key's current full state if the key is live, under its own lock. Those
// fresh Full records go to the head; once they are fsynced the old
// segments are removed, oldest first. The only memory is a set of the keys
// rewritten in the current run; between runs the journal keeps a few words
// per segment.
//
// Replay stays correct because the log only ever loses a prefix, and
// every live key whose latest Full was in the removed prefix has a newer
// Full after it; the Updates of a key always follow its latest Full, so
// only superseded Updates can lose their Full. Deletes in the prefix go
// with everything older than them, so they cannot leave a record alive to
// resurrect. Removals happen oldest first, each made durable before the
// next, so a crash in the middle leaves a shorter prefix removed, never a
// hole. See compact.go for the full argument.
//
// With steady traffic the directory stays below about
// (CompactRatio+1) × live bytes + 2 × SegmentSize: the sealed segments
// reach CompactRatio × live before a run, the run writes the live state
// once more before removing them, and the head adds up to a segment.
// Rewriting costs at most one copy of the live state per CompactRatio−1
// live states of new records.
//
// # Files
//
// The directory holds LOCK (an flock, held while open, with the owner's
// pid for the error a second process gets) and segments named by 16 hex
// digits of their sequence number with the extension .jnl. Other files are
// ignored.
package journal
