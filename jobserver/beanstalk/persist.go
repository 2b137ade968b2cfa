package beanstalk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/jobserver/journal"
)

// Persistence (DESIGN.md, decision 8): with Config.Journal set, every
// acknowledged change to a job is journaled before its reply goes out.
//
//	put              Full    (id, tube, pri, delay deadline, ttr, body, counters)
//	release, bury    Update  (state, pri, delay, deadline or burial order, counters)
//	kick, kick-job   Update  (one per job moved)
//	reserve-job      Update  only when it takes a delayed or buried job (see below)
//	delete           Delete
//
// Nothing else is journaled. Reserve, touch, TTR expiry, a closed
// connection and a delayed job coming due need no record: a reserved job
// comes back ready on replay, and a delayed job whose journaled deadline
// has passed comes back ready too. reserve-job of a delayed or buried job
// writes "ready", since once reserved the job can only return to ready
// (TTR, close) without another record, and must not come back buried or
// still delayed. Tube pauses are not journaled: beanstalkd's binlog does
// not keep them either, and a pause is an operator's short-lived action,
// not an acknowledged job. The reserves and timeouts counters are those
// of the job's latest record.
//
// Times cross restarts as wall-clock Unix nanoseconds (the engine's own
// times are relative to its start), so the delay left after a restart is
// the journaled deadline minus the new wall time.
//
// The id counter lives in the Full record of key 0 (ids start at 1),
// written at start and rewritten by every compaction, so ids keep growing
// even when compaction has removed the records of the highest (deleted)
// jobs.
//
// Visibility: a put's job is pending (in the job table, so compaction
// keeps its record, but invisible to every command) until its record is
// durable; only then does it become ready or delayed and get its INSERTED.
// beanstalkd shows a job first and writes it after; here a consumer never
// sees a job that a crash could still take back. Other changes (release,
// bury, kick, delete) apply at once and are acknowledged once durable: a
// crash in between only undoes a change nobody was told about, which is
// what an unacknowledged command may do anyway. If the journal fails, the
// command answers INTERNAL_ERROR; a failed put's job is dropped. The
// journal then refuses everything (journal.ErrFailed) until a restart,
// whose replay reflects exactly what was durable.

// Journal is what the engine needs of a durable log. OpenJournal returns
// the implementation on disk; tests may use another. The engine calls
// AppendAsync with its lock held, in the order of its state changes, and
// waits for Tickets without it.
type Journal interface {
	// Attach is called once, by New, before any AppendAsync. It calls
	// restore for every live key, in any order, with the key's latest Full
	// record with every later Update applied (which is what the engine
	// itself would write for the key now); restore may keep data. Then it
	// makes snapshot the function compaction calls to rewrite a key (see
	// journal.Options.Snapshot). An error from restore is returned.
	Attach(restore func(key uint64, data []byte) error, snapshot func(key uint64, put func(data []byte))) error
	// AppendAsync queues rec and returns its Ticket at once. Records are
	// written in call order, and their Tickets complete in that order.
	AppendAsync(rec journal.Record) (Ticket, error)
}

// Ticket is the durability of one appended record (journal.Ticket
// satisfies it).
type Ticket interface {
	// Done is closed once Wait would not block; nil means already durable.
	Done() <-chan struct{}
	// Wait blocks until the record is durable and returns the write or
	// fsync error, if any.
	Wait() error
}

var _ Ticket = journal.Ticket{}

// QuietJournal is a Journal that can also queue a record without waking
// its writer and write what is queued on the caller's goroutine
// (journal.Journal's AppendQuiet and WriteQueued; FileJournal has them).
// With one, the records of ExecAsync's changes are queued quietly, and the
// event loop writes them at the end of its batch (Engine.WriteQueued).
type QuietJournal interface {
	Journal
	// AppendQuiet is AppendAsync without waking the writer; WriteQueued
	// must follow.
	AppendQuiet(rec journal.Record) (Ticket, error)
	// WriteQueued writes what is queued if it can do so without an fsync
	// and reports whether it did; otherwise it wakes the writer.
	WriteQueued() bool
}

// appendLocked appends rec: quietly while ExecAsync runs a command with a
// QuietJournal, else with AppendAsync.
func (e *Engine) appendLocked(rec journal.Record) (Ticket, error) {
	if e.quiet {
		return e.qjr.AppendQuiet(rec)
	}
	return e.jr.AppendAsync(rec)
}

// recordVersion starts every record's Data, so a later format can be told
// apart (and an older jobgate refuses it instead of misreading it).
const recordVersion = 1

// recordVersionTraced marks every record of a traced job: its Full record
// carries the job's creation context (trace.go) after the tube name. A
// job's records all have the same version, since an Update's header
// replaces the Full record's. Journals written before tracing hold only
// version 1 and replay unchanged.
const recordVersionTraced = 2

// counterKey is the key of the record that holds the last issued id.
const counterKey = 0

// Journaled states: a reserved job is journaled as ready.
const (
	recReady   = 'r'
	recDelayed = 'd' // at: the wall-clock deadline, Unix ns
	recBuried  = 'b' // at: the burial sequence number, which orders the buried FIFO
)

// errBadRecord is returned (wrapped) for a record the engine cannot decode.
var errBadRecord = errors.New("beanstalk: bad journal record")

// A job's record. The header is the whole of an Update and the start of a
// Full; an Update replaces the header of the state it applies to:
//
//	header: version(1) state(1) pri delay at(varint)
//	        reserves timeouts releases buries kicks
//	Full:   header ttr created(varint, wall ns) len(tube) tube body...
//	Full of a traced job (version 2):
//	        header ttr created len(tube) tube creation(26) body...
//
// Unmarked integers are uvarints.

// appendHeader appends j's header; at is the wall deadline of a delayed
// job, already converted.
func (e *Engine) appendHeader(dst []byte, j *job, state byte, at int64) []byte {
	v := byte(recordVersion)
	if j.traced {
		v = recordVersionTraced
	}
	dst = append(dst, v, state)
	dst = binary.AppendUvarint(dst, uint64(j.pri))
	dst = binary.AppendUvarint(dst, uint64(j.delay))
	dst = binary.AppendVarint(dst, at)
	for _, c := range [...]uint32{j.reserves, j.timeouts, j.releases, j.buries, j.kicks} {
		dst = binary.AppendUvarint(dst, uint64(c))
	}
	return dst
}

// appendJobRecord appends j's Full record as it stands: a reserved job is
// written as ready, a pending one as it will be placed.
func (e *Engine) appendJobRecord(dst []byte, j *job) []byte {
	state, at := e.recState(j)
	dst = e.appendHeader(dst, j, state, at)
	dst = binary.AppendUvarint(dst, uint64(j.ttr))
	dst = binary.AppendVarint(dst, e.wall(j.created))
	dst = binary.AppendUvarint(dst, uint64(len(j.tube.name)))
	dst = append(dst, j.tube.name...)
	if tr := e.jobs.traceOf(j); tr != nil {
		dst = append(dst, tr.creation[:]...)
	}
	return append(dst, j.body...)
}

// recState returns the journaled state of j and its at field.
func (e *Engine) recState(j *job) (byte, int64) {
	switch j.state {
	case stateDelayed:
		return recDelayed, e.wall(j.deadline)
	case stateBuried:
		return recBuried, j.deadline
	case statePending:
		if j.delay > 0 {
			return recDelayed, e.wall(j.created + int64(j.delay)*int64(time.Second))
		}
	}
	return recReady, 0
}

// wall converts engine nanoseconds to wall-clock Unix nanoseconds.
func (e *Engine) wall(t int64) int64 { return e.startWall + t }

// jobRecord is a decoded record. tube and body point into the record.
type jobRecord struct {
	state                                       byte
	pri, delay, ttr                             uint32
	at, created                                 int64
	reserves, timeouts, releases, buries, kicks uint32
	tube, body                                  []byte
	hdrLen                                      int      // bytes of the header
	creation                                    Creation // version 2 only
}

// decodeRecord decodes a header, and the rest of a Full record when full.
func decodeRecord(b []byte, full bool) (jobRecord, error) {
	var r jobRecord
	if len(b) < 2 || b[0] != recordVersion && b[0] != recordVersionTraced {
		return r, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	r.state = b[1]
	if r.state != recReady && r.state != recDelayed && r.state != recBuried {
		return r, fmt.Errorf("%w: state %q", errBadRecord, r.state)
	}
	rest := b[2:]
	bad := false
	u32 := func() uint32 {
		v, n := binary.Uvarint(rest)
		if n <= 0 || v > 1<<32-1 {
			bad = true
			return 0
		}
		rest = rest[n:]
		return uint32(v)
	}
	i64 := func() int64 {
		v, n := binary.Varint(rest)
		if n <= 0 {
			bad = true
			return 0
		}
		rest = rest[n:]
		return v
	}
	r.pri, r.delay, r.at = u32(), u32(), i64()
	r.reserves, r.timeouts, r.releases, r.buries, r.kicks = u32(), u32(), u32(), u32(), u32()
	if bad {
		return r, fmt.Errorf("%w: header", errBadRecord)
	}
	r.hdrLen = len(b) - len(rest)
	if !full {
		return r, nil
	}
	r.ttr, r.created = u32(), i64()
	n := u32()
	if bad || r.ttr == 0 || uint64(n) > uint64(len(rest)) || n == 0 {
		return r, fmt.Errorf("%w: job", errBadRecord)
	}
	r.tube, r.body = rest[:n], rest[n:]
	if b[0] == recordVersionTraced {
		if len(r.body) < CreationLen {
			return r, fmt.Errorf("%w: creation context", errBadRecord)
		}
		copy(r.creation[:], r.body)
		r.body = r.body[CreationLen:]
	}
	return r, nil
}

// appendCounterRecord encodes the id counter record: the last issued id.
func appendCounterRecord(dst []byte, last uint64) []byte {
	return binary.AppendUvarint(append(dst, recordVersion), last)
}

func decodeCounterRecord(b []byte) (uint64, error) {
	if len(b) < 2 || b[0] != recordVersion {
		return 0, fmt.Errorf("%w: id counter", errBadRecord)
	}
	last, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return 0, fmt.Errorf("%w: id counter", errBadRecord)
	}
	return last, nil
}

// restore loads the journal's live jobs at New: ready and reserved jobs
// come back ready, delayed ones delayed until their journaled deadline (or
// ready if it has passed), buried ones buried in their old order. Ids
// continue after the highest the journal mentions.
func (e *Engine) restore() error {
	last := uint64(0)
	restored := 0
	err := e.jr.Attach(func(key uint64, data []byte) error {
		if key == counterKey {
			n, err := decodeCounterRecord(data)
			last = max(last, n)
			return err
		}
		r, err := decodeRecord(data, true)
		if err != nil {
			return fmt.Errorf("job %d: %w", key, err)
		}
		last = max(last, key)
		restored++
		j := &job{id: key, pri: r.pri, delay: r.delay, ttr: r.ttr, idx: -1, body: r.body,
			reserves: r.reserves, timeouts: r.timeouts, releases: r.releases, buries: r.buries, kicks: r.kicks}
		j.created = r.created - e.startWall
		// Locked per job: a timer armed for an earlier job may fire.
		e.mu.Lock()
		defer e.mu.Unlock()
		j.tube = e.tubeLocked(r.tube)
		e.refLocked(j.tube)
		e.jobs.add(j)
		e.putCreation = r.creation
		e.traceAttachLocked(j)
		j.tube.totalJobs++
		e.st.totalJobs++
		switch r.state {
		case recBuried:
			// The burial sequence orders the buried heap, so the FIFO
			// comes back in its old order whatever the restore order.
			j.state = stateBuried
			j.deadline = r.at
			j.tube.buried.push(j)
			e.st.buried++
			e.buriedSeq = max(e.buriedSeq, r.at)
		case recDelayed:
			now := e.now()
			e.enqueueLocked(j, max(r.at-e.startWall-now, 0), now)
		default:
			e.enqueueLocked(j, 0, e.now())
		}
		return nil
	}, e.snapshot)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.nextID = max(e.nextID, last+1)
	e.restored = restored
	// Record the counter now, so that a compaction that removes the
	// records of the highest ids still leaves it.
	e.rec = appendCounterRecord(e.rec[:0], e.nextID-1)
	t, err := e.jr.AppendAsync(journal.Record{Key: counterKey, Kind: journal.Full, Data: e.rec})
	e.mu.Unlock()
	if err == nil {
		err = t.Wait() // at start, before any connection
	}
	if err != nil {
		return fmt.Errorf("beanstalk: journal: %w", err)
	}
	return nil
}

// snapshot is the journal's compaction callback: the current Full record
// of key, if the key is live. It takes the engine lock, which orders it
// with the engine's own appends.
func (e *Engine) snapshot(key uint64, put func(data []byte)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if key == counterKey {
		put(appendCounterRecord(e.snap[:0], e.nextID-1))
		return
	}
	j := e.jobs.get(key)
	if j == nil {
		return
	}
	e.snap = e.appendJobRecord(e.snap[:0], j)
	put(e.snap)
	if cap(e.snap) > 64<<10 {
		e.snap = nil // do not keep a large job's copy
	}
}

// journalFull appends j's Full record.
func (e *Engine) journalFull(j *job) (Ticket, error) {
	e.rec = e.appendJobRecord(e.rec[:0], j)
	t, err := e.appendLocked(journal.Record{Key: j.id, Kind: journal.Full, Data: e.rec})
	if cap(e.rec) > 64<<10 {
		e.rec = nil
	}
	return t, err
}

// journalUpdate appends the Update of j's current state. A failed append
// comes back as a Ticket whose Wait reports it, so callers that append
// several records need only wait for the last.
func (e *Engine) journalUpdate(j *job) Ticket {
	state, at := e.recState(j)
	e.rec = e.appendHeader(e.rec[:0], j, state, at)
	return e.checked(e.appendLocked(journal.Record{Key: j.id, Kind: journal.Update, Data: e.rec}))
}

// journalDelete appends the Delete of job id.
func (e *Engine) journalDelete(id uint64) Ticket {
	return e.checked(e.appendLocked(journal.Record{Key: id, Kind: journal.Delete}))
}

// checked turns an append error into a failed Ticket.
func (e *Engine) checked(t Ticket, err error) Ticket {
	if err != nil {
		return failedTicket{err}
	}
	return t
}

// failedTicket is the Ticket of an append that failed at once.
type failedTicket struct{ err error }

func (failedTicket) Done() <-chan struct{} { return nil }
func (f failedTicket) Wait() error         { return f.err }

// Restored returns the number of jobs New restored from the journal.
func (e *Engine) Restored() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restored
}
