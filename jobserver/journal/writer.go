package journal

import (
	"fmt"
	"os"
)

// batch is a group of records written with one write call and, under the
// Always policy, covered by one fsync: the unit of group commit. Appenders
// fill the newest batch under Journal.mu while the previous ones are
// written, so the records that arrive during one fsync all share the next.
//
// Who writes: whoever finds the file free (Journal.writing false) takes
// every queued batch and writes them, either a goroutine waiting for its
// own record (Append, Ticket.Wait, Sync: the uncontended case costs no
// goroutine switch) or the writer goroutine, which AppendAsync wakes so a
// record is written even if nobody waits for it. When a writer finishes
// and more batches are queued it wakes the writer goroutine, so nothing
// queued is left behind.
type batch struct {
	j     *Journal
	seg   uint64 // the segment the records belong to
	buf   []byte // encoded frames
	sync  bool   // fsync after writing, whatever the policy (Sync)
	taken bool   // a writer has it; guarded by Journal.mu
	// done is closed once the batch is written (and fsynced if the policy
	// or sync asks); err is set before.
	done chan struct{}
	err  error
}

// Ticket is the durability of one AppendAsync call.
type Ticket struct{ b *batch }

// Wait blocks until the record is durable under the sync policy and returns
// the write or fsync error, if any. If no one is writing it writes the
// queued records itself. The zero Ticket returns nil at once.
func (t Ticket) Wait() error {
	if t.b == nil {
		return nil
	}
	select {
	case <-t.b.done:
	default:
		t.b.j.lead(t.b)
		<-t.b.done
	}
	return t.b.err
}

// Done returns a channel that is closed when Wait would not block, for
// engines that select on several events. It is nil for the zero Ticket.
func (t Ticket) Done() <-chan struct{} {
	if t.b == nil {
		return nil
	}
	return t.b.done
}

// openBatchLocked returns the batch new records of the head segment go to:
// the last queued batch if it is for the head, else a new one.
func (j *Journal) openBatchLocked() *batch {
	head := j.segs[len(j.segs)-1].seq
	if n := len(j.queue); n > 0 && j.queue[n-1].seg == head {
		return j.queue[n-1]
	}
	b := &batch{j: j, seg: head, done: make(chan struct{})}
	if n := len(j.free); n > 0 {
		b.buf, j.free = j.free[n-1], j.free[:n-1]
	}
	j.queue = append(j.queue, b)
	return b
}

// rotateLocked seals the head: later records go to a new segment. The new
// segment gets an empty batch at once so the file is created even if
// nothing follows, keeping the files in step with j.segs.
func (j *Journal) rotateLocked() {
	seq := j.segs[len(j.segs)-1].seq + 1
	j.segs = append(j.segs, segment{seq: seq, size: segmentHeaderSize, readable: segmentHeaderSize})
	j.openBatchLocked()
}

// maxFreeBuffers bounds the recycled batch buffers; two cover the steady
// state of one batch filling while one is written.
const maxFreeBuffers = 4

// lead writes the queued batches on the calling goroutine, unless someone
// is writing already or b was taken; either way b is then on its way.
func (j *Journal) lead(b *batch) {
	j.mu.Lock()
	if j.writing || b.taken {
		// The writer goroutine, which the busy writer wakes when it is
		// done, must take b then, even if it was queued with quiet records
		// (inline.go): the caller is waiting.
		j.handed = true
		j.mu.Unlock()
		return
	}
	batches, err := j.takeLocked()
	j.mu.Unlock()
	j.process(batches, err)
}

// runWriter is the writer goroutine: it writes what no waiting appender
// has, and at Close it flushes, fsyncs and closes the head.
func (j *Journal) runWriter() {
	defer close(j.writerDone)
	for {
		j.mu.Lock()
		for j.writing || (len(j.queue) == 0 || j.quiet && !j.handed) && !j.closing {
			j.wake.Wait()
		}
		if len(j.queue) == 0 { // closing, and everything is written
			failed := j.failed
			j.mu.Unlock()
			j.closeErr = j.finish(failed)
			return
		}
		batches, err := j.takeLocked()
		j.mu.Unlock()
		j.process(batches, err)
	}
}

// takeLocked hands every queued batch to the caller, who becomes the
// writer, and returns the sticky failure if there is one.
func (j *Journal) takeLocked() ([]*batch, error) {
	batches := j.queue
	j.queue = j.spare
	for _, b := range batches {
		b.taken = true
	}
	j.writing = true
	j.quiet, j.handed = false, false // what they held back is taken
	return batches, j.failed
}

// process writes batches (unless the journal has failed), then completes
// them and gives up the writer role.
func (j *Journal) process(batches []*batch, err error) {
	// After a failure nothing more may reach the file: a record after a
	// half-written one could never be replayed, and the tail repair at
	// the next Open must find the last acknowledged record last.
	if err == nil {
		if werr := j.writeBatches(batches); werr != nil {
			err = fmt.Errorf("%w: %w", ErrFailed, werr)
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil && j.failed == nil {
		j.failed = err
		j.log.Error("journal: write failed; refusing further appends", "dir", j.dir, "err", err)
	}
	for i, b := range batches {
		j.pending -= int64(len(b.buf))
		if len(j.free) < maxFreeBuffers && cap(b.buf) <= int(j.opts.MaxPending) {
			j.free = append(j.free, b.buf[:0])
		}
		b.buf = nil
		b.err = err
		close(b.done)
		batches[i] = nil
	}
	j.spare = batches[:0]
	j.writing = false
	if len(j.queue) > 0 || j.closing {
		j.wake.Signal()
	}
	j.space.Broadcast()
}

// writeBatches writes bs in order, starting new segment files where the
// batches say, then fsyncs if any batch (or the Always policy) wants it.
func (j *Journal) writeBatches(bs []*batch) error {
	needSync := j.opts.Sync.mode == modeAlways
	for _, b := range bs {
		if b.seg != j.fseq {
			if err := j.rotateFile(b.seg); err != nil {
				return err
			}
		}
		if len(b.buf) > 0 {
			if _, err := j.f.Write(b.buf); err != nil {
				return fmt.Errorf("write %s: %w", j.f.Name(), err)
			}
			j.dirty = true
			j.writes.Add(1)
		}
		needSync = needSync || b.sync
	}
	if needSync && j.dirty {
		return j.syncHead()
	}
	return nil
}

// rotateFile seals the current file and starts segment seq. The sealed file
// is fsynced whatever the policy, so only the newest segment can have a
// torn tail after a power loss.
func (j *Journal) rotateFile(seq uint64) error {
	if seq != j.fseq+1 {
		return fmt.Errorf("internal error: rotating from segment %d to %d", j.fseq, seq)
	}
	if j.dirty {
		if err := j.syncHead(); err != nil {
			return err
		}
	}
	old := j.f
	j.f = nil
	if err := old.Close(); err != nil {
		return fmt.Errorf("close %s: %w", old.Name(), err)
	}
	f, err := createSegment(j.dir, seq, j.syncFile, j.opts.syncDir)
	if err != nil {
		return err
	}
	j.f, j.fseq = f, seq
	// Tell the compactor; one pending kick covers any number of
	// rotations, since it looks at the state when it runs.
	j.kicksSent.Add(1)
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return nil
}

// syncHead fsyncs the current file.
func (j *Journal) syncHead() error {
	if err := j.syncFile(j.f); err != nil {
		return fmt.Errorf("fsync %s: %w", j.f.Name(), err)
	}
	j.dirty = false
	return nil
}

// syncFile is Options.syncFile with counting and timing for Stats.
func (j *Journal) syncFile(f *os.File) error {
	start := j.opts.Clock.Now()
	err := j.opts.syncFile(f)
	lat := j.opts.Clock.Now().Sub(start)
	j.lastSyncLat.Store(int64(lat))
	j.syncs.Add(1)
	if j.opts.OnSync != nil {
		j.opts.OnSync(lat)
	}
	return err
}

// finish is the writer's last act at Close: fsync what is unsynced (unless
// the journal failed, when the file is not to be touched) and close it.
func (j *Journal) finish(failed error) error {
	if j.f == nil {
		return nil
	}
	var err error
	if failed == nil && j.dirty {
		if serr := j.syncHead(); serr != nil {
			err = fmt.Errorf("%w: %w", ErrFailed, serr)
		}
	}
	if cerr := j.f.Close(); err == nil && cerr != nil && failed == nil {
		err = fmt.Errorf("journal: close %s: %w", j.f.Name(), cerr)
	}
	j.f = nil
	return err
}
