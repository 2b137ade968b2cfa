package journal

// Writing on the appender's goroutine. An event loop that acknowledges
// changes once their records are written (ExecAsync in the engines) would
// otherwise hand every record to the writer goroutine and wait for it to
// come back: two goroutine wake-ups per change, most of the cost of a
// journaled put on one connection. Instead it appends without waking the
// writer (AppendQuiet) and, at the end of its batch, writes what is
// queued itself (WriteQueued), when that costs no more than the write
// system calls: the policy fsyncs nothing per write, nothing queued asks
// for an fsync, and no segment has to be started (which fsyncs the one
// before). Otherwise the writer goroutine does it, as for AppendAsync.

// AppendQuiet is AppendAsync without waking the writer goroutine: the
// record waits until the caller calls WriteQueued, or another append or
// the Interval timer wakes the writer. A caller must call WriteQueued
// before it waits for anything.
func (j *Journal) AppendQuiet(rec Record) (Ticket, error) {
	b, err := j.enqueue(rec, appendQuiet)
	return Ticket{b: b}, err
}

// WriteQueued writes the queued records on the caller's goroutine and
// completes their Tickets, if that needs no fsync and nobody else is
// writing; it reports whether it did. Otherwise it wakes the writer
// goroutine, which writes them (AppendQuiet's records included).
func (j *Journal) WriteQueued() bool {
	j.mu.Lock()
	if len(j.queue) == 0 {
		j.quiet = false
		j.mu.Unlock()
		return false
	}
	if j.writing || !j.inlineLocked() {
		j.releaseQuietLocked()
		j.mu.Unlock()
		return false
	}
	j.quiet = false
	batches, err := j.takeLocked()
	j.mu.Unlock()
	j.process(batches, err)
	return true
}

// inlineLocked reports whether writing the queue costs only writes: no
// fsync by policy or request, no new segment file, not closing. With
// nobody writing, f and fseq are stable to read under mu.
func (j *Journal) inlineLocked() bool {
	if j.opts.Sync.mode == modeAlways || j.closing {
		return false
	}
	for _, b := range j.queue {
		if b.sync || b.seg != j.fseq {
			return false
		}
	}
	return true
}

// releaseQuietLocked hands what is queued to the writer goroutine: an
// append that wants it written soon, or a wait for queue space, which
// only a write gives back.
func (j *Journal) releaseQuietLocked() {
	j.quiet = false
	if !j.writing && len(j.queue) > 0 {
		j.wake.Signal()
	}
}
