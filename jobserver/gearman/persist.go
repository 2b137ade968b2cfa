package gearman

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/jobgate/jobgate/jobserver/journal"
)

// Persistence (DESIGN.md, decision 8): background jobs are journaled, as
// gearmand's persistent queues store them; foreground jobs are not, since
// their client is gone after a restart. A background job gets a Full
// record when it is created and a Delete when it is gone (completed,
// failed, cancelled, dropped, out of retries). Running jobs need no record:
// they come back queued. The handle counter is kept in the Full record of
// key 0 (job ids start at 1), written at start and by compaction, so that
// handles keep growing even when compaction has removed the records of the
// highest ones.

// Journal is what the engine needs of a durable log. OpenJournal returns
// the implementation on disk; tests may use another. The engine calls
// AppendAsync with its lock held, in the order of its state changes, and
// never waits for a Ticket on a goroutine that serves connections.
type Journal interface {
	// Attach is called once, by New, before any AppendAsync. It calls
	// restore for every live record (the latest Full record of each key
	// not deleted since), in ascending key order, then makes snapshot the
	// function compaction calls to rewrite a key (see journal.Options).
	// An error from restore is returned.
	Attach(restore func(key uint64, data []byte) error, snapshot func(key uint64, put func(data []byte))) error
	// AppendAsync queues rec and returns its Ticket at once. Records are
	// written in call order, and their Tickets complete in that order.
	AppendAsync(rec journal.Record) (Ticket, error)
}

// QuietJournal is a Journal that can also queue a record without waking
// its writer and write what is queued on the caller's goroutine
// (journal.Journal's AppendQuiet and WriteQueued; FileJournal has them).
// With one, the records of requests from sessions an event loop serves
// (Session.SetLoopWrites) are queued quietly, and the loop writes them at
// the end of its batch (Engine.WriteQueued).
type QuietJournal interface {
	Journal
	// AppendQuiet is AppendAsync without waking the writer; WriteQueued
	// must follow.
	AppendQuiet(rec journal.Record) (Ticket, error)
	// WriteQueued writes what is queued if it can do so without an fsync
	// and reports whether it did; otherwise it wakes the writer.
	WriteQueued() bool
}

// appendLocked appends rec: quietly while a loop session's request is
// handled with a QuietJournal, else with AppendAsync.
func (e *Engine) appendLocked(rec journal.Record) (Ticket, error) {
	if e.quiet {
		return e.qjr.AppendQuiet(rec)
	}
	return e.jr.AppendAsync(rec)
}

// Ticket is the durability of one appended record (journal.Ticket
// satisfies it). Tickets of the records written together may share their
// Done channel.
type Ticket interface {
	// Done is closed once Wait would not block; nil means already durable.
	Done() <-chan struct{}
	// Wait blocks until the record is durable and returns the write or
	// fsync error, if any.
	Wait() error
}

// recordVersion starts every record's Data, so a later format can be told
// apart (and an older jobgate refuses it instead of misreading it).
const recordVersion = 1

// counterKey is the key of the record that holds the handle counter.
const counterKey = 0

// errBadRecord is returned (wrapped) for a record the engine cannot decode.
var errBadRecord = errors.New("gearman: bad journal record")

// appendJobRecord encodes the Full record of background job j, whose
// runnable time is at (unix ns, 0: now):
//
//	version(1) prio(1) at(varint) len(fn) fn len(unique) unique
//	reducer(uvarint: 0 none, n+1 a reducer of n bytes) [reducer] data...
func appendJobRecord(dst []byte, j *job, at int64) []byte {
	return appendJobRecordTraced(dst, j, at, nil)
}

// recordVersionTraced marks the Full record of a traced job, which
// carries the job's creation context (trace.go) right after prio:
//
//	version(2) prio(1) creation(26) at(varint) ... as version 1
//
// Journals written before tracing hold only version 1 and replay
// unchanged.
const recordVersionTraced = 2

// appendJobRecordTraced is appendJobRecord for a job traced with c (nil:
// untraced, a version 1 record).
func appendJobRecordTraced(dst []byte, j *job, at int64, c *Creation) []byte {
	if c != nil {
		dst = append(dst, recordVersionTraced, j.prio)
		dst = append(dst, c[:]...)
	} else {
		dst = append(dst, recordVersion, j.prio)
	}
	dst = binary.AppendVarint(dst, at)
	dst = binary.AppendUvarint(dst, uint64(len(j.fn.name)))
	dst = append(dst, j.fn.name...)
	dst = binary.AppendUvarint(dst, uint64(j.ulen))
	dst = append(dst, j.unique()...)
	if r := j.reducer(); r != nil {
		dst = binary.AppendUvarint(dst, uint64(len(*r))+1)
		dst = append(dst, *r...)
	} else {
		dst = append(dst, 0)
	}
	return append(dst, j.data()...)
}

// jobRecord is a decoded Full record. Its slices point into the record.
type jobRecord struct {
	prio                   uint8
	at                     int64
	fn, unique, data, redc []byte
	hasReducer             bool
	creation               Creation // version 2 only
}

// decodeJobRecord decodes what appendJobRecord wrote.
func decodeJobRecord(b []byte) (jobRecord, error) {
	var r jobRecord
	if len(b) < 2 || b[0] != recordVersion && b[0] != recordVersionTraced {
		return r, fmt.Errorf("%w: unknown version", errBadRecord)
	}
	r.prio = b[1]
	if r.prio >= numPrio {
		return r, fmt.Errorf("%w: priority %d", errBadRecord, r.prio)
	}
	traced := b[0] == recordVersionTraced
	b = b[2:]
	if traced {
		if len(b) < CreationLen {
			return r, fmt.Errorf("%w: creation context", errBadRecord)
		}
		copy(r.creation[:], b)
		b = b[CreationLen:]
	}
	at, n := binary.Varint(b)
	if n <= 0 {
		return r, fmt.Errorf("%w: time", errBadRecord)
	}
	r.at, b = at, b[n:]
	field := func(what string) ([]byte, error) {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: %s", errBadRecord, what)
		}
		f := b[n : n+int(l)]
		b = b[n+int(l):]
		return f, nil
	}
	var err error
	if r.fn, err = field("function"); err != nil {
		return r, err
	}
	if r.unique, err = field("unique"); err != nil {
		return r, err
	}
	if len(r.unique) > MaxUniqueLen {
		return r, fmt.Errorf("%w: unique too long", errBadRecord)
	}
	rl, n := binary.Uvarint(b)
	if n <= 0 || (rl > 0 && rl-1 > uint64(len(b)-n)) {
		return r, fmt.Errorf("%w: reducer", errBadRecord)
	}
	b = b[n:]
	if rl > 0 {
		r.hasReducer = true
		r.redc, b = b[:rl-1], b[rl-1:]
	}
	r.data = b
	return r, nil
}

// appendCounterRecord encodes the handle counter record.
func appendCounterRecord(dst []byte, last uint64) []byte {
	return binary.AppendUvarint(append(dst, recordVersion), last)
}

// restore loads the journal's live records at New: jobs come back queued
// (or delayed until their time), in handle order, with their handles.
func (e *Engine) restore() error {
	var jobs []*job
	var ats []int64
	err := e.jr.Attach(func(key uint64, data []byte) error {
		if key == counterKey {
			if len(data) < 2 || data[0] != recordVersion {
				return fmt.Errorf("%w: handle counter", errBadRecord)
			}
			last, n := binary.Uvarint(data[1:])
			if n <= 0 {
				return fmt.Errorf("%w: handle counter", errBadRecord)
			}
			e.lastID = max(e.lastID, last)
			return nil
		}
		r, err := decodeJobRecord(data)
		if err != nil {
			return fmt.Errorf("job %d: %w", key, err)
		}
		j := e.newJob(len(r.unique) + len(r.data))
		copy(j.buf, r.unique)
		copy(j.buf[len(r.unique):], r.data)
		j.id = key
		j.fn = e.function(r.fn)
		j.ulen = uint8(len(r.unique))
		j.prio = r.prio
		j.bg = true
		j.journaled = true
		j.dataKey = len(r.unique) == 1 && r.unique[0] == '-'
		if r.hasReducer {
			s := string(r.redc)
			e.extOf(j).reducer = &s
		}
		jobs = append(jobs, j)
		ats = append(ats, r.at)
		if r.creation != (Creation{}) {
			e.traceAttach(j, r.creation)
		}
		e.lastID = max(e.lastID, key)
		return nil
	}, e.snapshot)
	if err != nil {
		return err
	}
	// Attach gives keys in order; sort anyway, since queue order is
	// handle order and a Journal from elsewhere may not.
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if jobs[a].id < jobs[b].id {
			return -1
		}
		return 1
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, i := range idx {
		j := jobs[i]
		if e.jobs[j.id] != nil {
			continue // a duplicate key from a foreign Journal
		}
		e.jobs[j.id] = j
		j.fn.addUnique(j)
		e.place(j, ats[i])
		e.traceRestored(j)
	}
	// Record the counter now, so that a compaction that removes the
	// records of the highest handles still leaves it.
	e.scratch = appendCounterRecord(e.scratch[:0], e.lastID)
	t, err := e.jr.AppendAsync(journal.Record{Key: counterKey, Kind: journal.Full, Data: e.scratch})
	if err != nil {
		return fmt.Errorf("gearman: journal: %w", err)
	}
	if err := t.Wait(); err != nil { // at start, before any connection
		return fmt.Errorf("gearman: journal: %w", err)
	}
	return nil
}

// appendRecordOf appends j's Full record, with its creation context if
// j is traced.
func (e *Engine) appendRecordOf(dst []byte, j *job, at int64) []byte {
	if tr := j.trace(); tr != nil {
		return appendJobRecordTraced(dst, j, at, &tr.creation)
	}
	return appendJobRecord(dst, j, at)
}

// place queues j, or delays it until at when that is in the future.
func (e *Engine) place(j *job, at int64) {
	if at > 0 && at > e.now() {
		e.delay(j, at)
	} else {
		e.enqueue(j)
	}
}

// snapshot is the journal's compaction callback: the current Full record
// of key, if the key is live. It takes the engine lock, which orders it
// with the engine's own appends.
func (e *Engine) snapshot(key uint64, put func(data []byte)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if key == counterKey {
		put(appendCounterRecord(e.snap[:0], e.lastID))
		return
	}
	j := e.jobs[key]
	if j == nil || !j.journaled {
		return
	}
	var at int64
	switch j.state {
	case stateDelayed, statePending:
		at = j.at
	}
	e.snap = e.appendRecordOf(e.snap[:0], j, at)
	put(e.snap)
	if cap(e.snap) > 64<<10 {
		e.snap = nil // do not keep a large job's copy
	}
}

// journalJob appends the Full record of background job j, which becomes
// runnable at at, and returns the flight its acknowledgement waits for (0:
// durable already). pending says j is new and is to stay pending until
// then (the caller parks it); otherwise j is live already and only the
// acknowledgement waits.
func (e *Engine) journalJob(j *job, at int64, pending bool) (uint64, error) {
	e.snap = e.appendRecordOf(e.snap[:0], j, at)
	t, err := e.appendLocked(journal.Record{Key: j.id, Kind: journal.Full, Data: e.snap})
	if cap(e.snap) > 64<<10 {
		e.snap = nil
	}
	if err != nil {
		return 0, err
	}
	j.journaled = true
	var id uint64
	if pending {
		id = j.id
	}
	return e.track(t, id), nil
}

// journalDelete appends the Delete of j, if j has a Full record, and
// returns the flight that makes it durable (0: nothing appended). An append
// error is not reported here: the journal's failure is sticky, and every
// later submit fails with it.
func (e *Engine) journalDelete(j *job) uint64 {
	if !j.journaled {
		return 0
	}
	j.journaled = false
	t, err := e.appendLocked(journal.Record{Key: j.id, Kind: journal.Delete})
	if err != nil {
		return 0
	}
	return e.track(t, 0)
}
