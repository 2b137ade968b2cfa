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
	how := appendQuiet
	if j.opts.Sync.mode == modeAlways {
		how = appendWake // WriteQueued could never write it: no need to wait for it
	}
	b, err := j.enqueue(rec, how)
	return Ticket{b: b}, err
}

// WriteQueued writes the queued records on the caller's goroutine and
// completes their Tickets, if that needs no fsync and nobody else is
// writing; it reports whether it did. Otherwise it wakes the writer
// goroutine, which writes them (AppendQuiet's records included).
func (j *Journal) WriteQueued() bool {
	j.mu.Lock()
	if len(j.queue) == 0 {
		j.quiet, j.handed = false, false
		j.mu.Unlock()
		return false
	}
	if j.writing || !j.inlineLocked() {
		j.releaseQuietLocked()
		j.mu.Unlock()
		return false
	}
	batches, err := j.takeLocked()
	j.mu.Unlock()
	j.process(batches, err)
	return true
}

// inlineMax bounds what WriteQueued writes on the caller's goroutine: a
// batch of small records. A large record, or a queue that grew behind a
// busy writer, goes to the writer goroutine, so one write(2) cannot stall
// an event loop for long.
const inlineMax = 256 << 10

// inlineLocked reports whether writing the queue costs only a short
// write: no fsync by policy or request, no new segment file, not closing,
// at most inlineMax bytes. With nobody writing, f and fseq are stable to
// read under mu.
func (j *Journal) inlineLocked() bool {
	if j.opts.Sync.mode == modeAlways || j.closing || j.pending > inlineMax {
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
// only a write gives back. The hand-off holds until a writer takes the
// queue, whatever AppendQuiet queues meanwhile.
func (j *Journal) releaseQuietLocked() {
	j.handed = true
	if !j.writing && len(j.queue) > 0 {
		j.wake.Signal()
	}
}
