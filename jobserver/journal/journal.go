package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

// Errors returned by the journal. Wrapped errors carry the details; test
// with errors.Is.
var (
	// ErrLocked: another Journal, in this or another process, has the
	// directory open.
	ErrLocked = errors.New("journal: directory locked")
	// ErrClosed: the journal was closed.
	ErrClosed = errors.New("journal: closed")
	// ErrTooLarge: the record's Data exceeds Options.MaxRecordSize.
	ErrTooLarge = errors.New("journal: record too large")
	// ErrBadKind: the record's Kind is not Full, Update or Delete.
	ErrBadKind = errors.New("journal: invalid record kind")
	// ErrNoSnapshot: Compact was called without Options.Snapshot.
	ErrNoSnapshot = errors.New("journal: compaction needs Options.Snapshot")
	// ErrCorrupt: compaction found a bad record where Open had found good
	// ones (the disk changed under the journal); it removed nothing.
	ErrCorrupt = errors.New("journal: corrupt segment")
	// ErrFormat: a segment was written in another format version (by a
	// newer jobgate); Open refuses it rather than treat it as damage.
	ErrFormat = errors.New("journal: unknown format")
	// ErrForeign: the newest segment's header is complete but wrong (a
	// file copied or renamed into the directory). A crash cannot cause
	// that, so Open refuses to repair it by truncation.
	ErrForeign = errors.New("journal: foreign segment")
	// ErrFailed: an earlier write or fsync failed. After such an error the
	// state of the file is unknown (the page cache may have dropped the
	// data), so the journal refuses all further appends; restart the
	// process, and Open repairs the tail.
	ErrFailed = errors.New("journal: failed")
)

// Journal is an open journal directory. All methods are safe for
// concurrent use.
//
// Lock order: compactMu, then an engine's own lock (taken by
// Options.Snapshot), then Journal.mu. The journal never calls the engine
// while holding mu, and whoever writes the file (the writer goroutine or
// a goroutine in Append, Ticket.Wait or Sync) holds no journal lock while
// it writes, so appenders only wait for mu, never for the disk, unless
// MaxPending is reached.
type Journal struct {
	dir  string
	opts Options
	log  *slog.Logger
	lock *os.File

	mu       sync.Mutex
	wake     sync.Cond // wakes the writer goroutine: work queued, or close
	space    sync.Cond // broadcast when pending shrinks, on failure and on close
	queue    []*batch  // batches no writer has taken yet, in order
	spare    []*batch  // a previous queue slice, for reuse
	free     [][]byte  // recycled batch buffers
	pending  int64     // bytes queued or being written
	writing  bool      // someone owns the file (see batch)
	quiet    bool      // AppendQuiet queued records that wait for WriteQueued (inline.go)
	handed   bool      // the queue was handed to the writer goroutine: quiet no longer holds it back
	segs     []segment // every segment, ascending; the last is the head
	closing  bool
	failed   error
	timer    clock.Timer
	appends  uint64
	lastLive int64 // bytes the last compaction rewrote, the live estimate

	compactions    uint64
	compactedBytes int64
	copiedBytes    int64

	// closed mirrors closing for compaction, which checks it per record
	// without taking mu.
	closed atomic.Bool

	// Owned by whoever has writing set (and by Open before that).
	f        *os.File
	fseq     uint64
	dirty    bool // written since the last fsync of f
	closeErr error

	writes      atomic.Uint64
	syncs       atomic.Uint64
	lastSyncLat atomic.Int64

	compactMu     sync.Mutex    // one compaction at a time
	kick          chan struct{} // rotation -> compactor, buffered 1
	kicksSent     atomic.Uint64
	kicksDone     atomic.Uint64
	stop          chan struct{}
	writerDone    chan struct{}
	compactorDone chan struct{}
}

// ReplayReport describes what Open found on disk.
type ReplayReport struct {
	// Segments is the number of segment files read.
	Segments int
	// Records is the number of records passed to the replay function.
	Records int64
	// Bytes is the size of the segment files after repair.
	Bytes int64
	// Damage lists every place where reading stopped before the end of a
	// segment, and every gap in the segment numbers, oldest first. Empty
	// after a clean shutdown.
	Damage []Damage
}

// Damage is a segment that could not be read to its end.
type Damage struct {
	// Segment is the file name.
	Segment string
	// Offset is where the first bad frame starts.
	Offset int64
	// Lost is the number of bytes from Offset to the end of the file that
	// were not replayed, or -1 when the whole file is missing.
	Lost int64
	// Reason says what was wrong ("record checksum mismatch", ...).
	Reason string
	// Truncated is true for the newest segment, whose bad tail (a write
	// torn by a crash) was cut off so appends continue after the last good
	// record. An older segment is left as it is: its readable records were
	// replayed, the later segments too, and compaction removes the file in
	// due course.
	Truncated bool
}

// String formats the damage for a log line.
func (d Damage) String() string {
	if d.Lost < 0 {
		return d.Reason
	}
	action := "left in place"
	if d.Truncated {
		action = "truncated"
	}
	return fmt.Sprintf("%s at offset %d: %s; %d bytes %s", d.Segment, d.Offset, d.Reason, d.Lost, action)
}

// Stats is a snapshot of the journal's counters, for metrics.
type Stats struct {
	// Segments is the number of segment files.
	Segments int
	// Bytes is the size of the segment files, counting records queued for
	// writing.
	Bytes int64
	// Appends is the number of records accepted since Open, including the
	// ones compaction rewrote.
	Appends uint64
	// Writes is the number of write calls, one per group of records.
	Writes uint64
	// Syncs is the number of fsyncs of segment files.
	Syncs uint64
	// LastSyncLatency is how long the latest fsync took.
	LastSyncLatency time.Duration
	// Compactions is the number of completed compactions.
	Compactions uint64
	// CompactedBytes is the total size of the segments compaction removed.
	CompactedBytes int64
	// CopiedBytes is the total size of the Full records compaction wrote.
	CopiedBytes int64
	// LiveBytes is what the latest compaction rewrote: the size of the live
	// state at that time. Before the first compaction it is an estimate.
	LiveBytes int64
	// Err is the error that failed the journal, or nil.
	Err error
}

// Open locks dir (creating it if needed), replays every record in it, in
// log order, through replay, repairs a torn tail, and returns the journal
// ready for appends. replay may be nil. Record.Data passed to replay is
// only valid during the call. If replay returns an error Open stops and
// returns it.
//
// Damage is reported in the ReplayReport and logged; it is not an error.
// Open fails with ErrLocked if another Journal has the directory open.
func Open(dir string, opts Options, replay func(Record) error) (*Journal, ReplayReport, error) {
	var rep ReplayReport
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, rep, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, rep, fmt.Errorf("journal: create dir: %w", err)
	}
	lf, err := lockDir(dir)
	if err != nil {
		return nil, rep, err
	}
	j := &Journal{
		dir:        dir,
		opts:       opts,
		log:        opts.Logger,
		lock:       lf,
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	j.wake.L = &j.mu
	j.space.L = &j.mu
	if err := j.replay(replay, &rep); err != nil {
		unlockDir(lf)
		return nil, rep, err
	}
	if err := j.openHead(); err != nil {
		unlockDir(lf)
		return nil, rep, err
	}
	// Until a compaction measures it, take 1/CompactRatio of what is on
	// disk as live: the first automatic compaction then comes once the
	// sealed segments reach the size found at Open, so frequent restarts
	// cannot ratchet the bound up.
	j.lastLive = int64(float64(rep.Bytes) / opts.CompactRatio)

	go j.runWriter()
	if opts.Snapshot != nil && !opts.NoAutoCompact {
		j.compactorDone = make(chan struct{})
		go j.runCompactor()
	}
	if opts.Sync.mode == modeInterval {
		// Under mu: with a short interval the first tick can run, and
		// re-arm, before AfterFunc returns.
		j.mu.Lock()
		j.timer = opts.Clock.AfterFunc(opts.Sync.interval, j.tick)
		j.mu.Unlock()
	}
	return j, rep, nil
}

// replay reads every segment in order, builds j.segs and repairs the tail.
func (j *Journal) replay(fn func(Record) error, rep *ReplayReport) error {
	seqs, err := listSegments(j.dir)
	if err != nil {
		return fmt.Errorf("journal: list segments: %w", err)
	}
	count := func(r Record) error {
		rep.Records++
		if fn == nil {
			return nil
		}
		return fn(r)
	}
	var buf []byte
	for i, seq := range seqs {
		name := segmentName(seq)
		path := filepath.Join(j.dir, name)
		// Compaction only removes the oldest segments, so the numbers
		// are consecutive unless someone removed a file: say so, since
		// the records in it are lost.
		if i > 0 && seq != seqs[i-1]+1 {
			d := Damage{Segment: segmentName(seqs[i-1] + 1), Lost: -1,
				Reason: fmt.Sprintf("segments %s to %s are missing", segmentName(seqs[i-1]+1), segmentName(seq-1))}
			rep.Damage = append(rep.Damage, d)
			j.log.Warn("journal: missing segments", "dir", j.dir, "reason", d.Reason)
		}
		recs := rep.Records
		res, err := scanSegment(path, seq, -1, &buf, count)
		if err != nil {
			return err
		}
		rep.Segments++
		s := segment{seq: seq, size: res.size, readable: res.end}
		if res.damage != "" {
			d := Damage{Segment: name, Offset: res.end, Lost: res.size - res.end, Reason: res.damage}
			if i == len(seqs)-1 {
				if res.foreign {
					return fmt.Errorf("%w: %s: %s; move it away to start with an empty newest segment",
						ErrForeign, path, res.damage)
				}
				end, err := repairTail(path, seq, res.end, j.opts.syncFile)
				if err != nil {
					return err
				}
				s.size, s.readable = end, end
				d.Truncated = true
			}
			rep.Damage = append(rep.Damage, d)
			j.log.Warn("journal: damaged segment", "dir", j.dir, "segment", name, "offset", d.Offset,
				"lost_bytes", d.Lost, "reason", d.Reason, "truncated", d.Truncated,
				"records_replayed", rep.Records-recs)
		}
		rep.Bytes += s.size
		j.segs = append(j.segs, s)
	}
	return nil
}

// repairTail cuts the newest segment back to its last good record (or to a
// fresh header when even the header is bad) and makes the cut durable
// before anything is appended after it. It returns the new size.
func repairTail(path string, seq uint64, end int64, syncFile func(*os.File) error) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("journal: repair %s: %w", path, err)
	}
	defer f.Close()
	if end < segmentHeaderSize {
		end = segmentHeaderSize
		if err := f.Truncate(0); err != nil {
			return 0, fmt.Errorf("journal: repair %s: %w", path, err)
		}
		if _, err := f.WriteAt(segmentHeader(seq), 0); err != nil {
			return 0, fmt.Errorf("journal: repair %s: %w", path, err)
		}
	} else if err := f.Truncate(end); err != nil {
		return 0, fmt.Errorf("journal: repair %s: %w", path, err)
	}
	if err := syncFile(f); err != nil {
		return 0, fmt.Errorf("journal: sync %s: %w", path, err)
	}
	return end, nil
}

// openHead opens the newest segment for appending, creating the first one
// in an empty directory.
func (j *Journal) openHead() error {
	if len(j.segs) == 0 {
		f, err := createSegment(j.dir, 1, j.syncFile, j.opts.syncDir)
		if err != nil {
			return err
		}
		j.f, j.fseq = f, 1
		j.segs = append(j.segs, segment{seq: 1, size: segmentHeaderSize, readable: segmentHeaderSize})
		return nil
	}
	head := j.segs[len(j.segs)-1]
	f, err := os.OpenFile(filepath.Join(j.dir, segmentName(head.seq)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("journal: open head segment: %w", err)
	}
	j.f, j.fseq = f, head.seq
	return nil
}

// Append writes rec and returns once it is durable under the sync policy:
// after an fsync covering it (Always) or after its write (Interval, Never).
// Concurrent Appends share writes and fsyncs. Append may wait when
// MaxPending bytes are already queued.
func (j *Journal) Append(rec Record) error {
	b, err := j.enqueue(rec, appendLead)
	if err != nil {
		return err
	}
	j.lead(b)
	<-b.done
	return b.err
}

// AppendAsync queues rec and returns at once, with a Ticket to wait for its
// durability. Records are written in the order AppendAsync (or Append) was
// called, so an engine can call it while holding its own lock, to fix the
// order of its records, and Wait after releasing the lock. AppendAsync
// waits only when MaxPending bytes are already queued.
func (j *Journal) AppendAsync(rec Record) (Ticket, error) {
	b, err := j.enqueue(rec, appendWake)
	return Ticket{b: b}, err
}

// How enqueue hands a record on.
type appendHow uint8

const (
	appendWake  appendHow = iota // wake the writer goroutine
	appendLead                   // the caller leads the write itself
	appendQuiet                  // keep the writer away until WriteQueued (inline.go)
)

// enqueue copies rec into the open batch of the head segment, starting a
// new segment first when rec would not fit, and hands it on as how says.
func (j *Journal) enqueue(rec Record, how appendHow) (*batch, error) {
	if !rec.Kind.valid() {
		return nil, fmt.Errorf("%w: %d", ErrBadKind, uint8(rec.Kind))
	}
	if len(rec.Data) > j.opts.MaxRecordSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(rec.Data), j.opts.MaxRecordSize)
	}
	n := frameSize(len(rec.Data))
	j.mu.Lock()
	defer j.mu.Unlock()
	// One record larger than MaxPending still goes through, alone.
	for j.pending > 0 && j.pending+n > j.opts.MaxPending && j.usableLocked() == nil {
		j.releaseQuietLocked() // the space comes from writing them
		j.space.Wait()
	}
	if err := j.usableLocked(); err != nil {
		return nil, err
	}
	head := &j.segs[len(j.segs)-1]
	if head.size > segmentHeaderSize && head.size+n > j.opts.SegmentSize {
		j.rotateLocked()
		head = &j.segs[len(j.segs)-1]
	}
	b := j.openBatchLocked()
	b.buf = appendFrame(b.buf, rec)
	head.size += n
	head.readable += n
	j.pending += n
	j.appends++
	switch how {
	case appendWake:
		j.releaseQuietLocked()
	case appendQuiet:
		// Until WriteQueued, the writer goroutine leaves the queue alone,
		// even if an earlier wake-up is still on its way to it.
		j.quiet = true
	}
	return b, nil
}

// Sync flushes everything appended so far and fsyncs it, whatever the
// policy, and returns when that is done.
func (j *Journal) Sync() error {
	j.mu.Lock()
	if err := j.usableLocked(); err != nil {
		j.mu.Unlock()
		return err
	}
	b := j.openBatchLocked()
	b.sync = true
	j.mu.Unlock()
	j.lead(b)
	<-b.done
	return b.err
}

// tick is the Interval policy's timer function: fsync, then re-arm unless
// closing. It runs on the clock's goroutine (the test's, with a Fake), and
// returns only after the fsync, so a test that advances a Fake clock sees
// the fsync done when Advance returns.
func (j *Journal) tick() {
	_ = j.Sync() // a failure is sticky and reported by every later call
	j.mu.Lock()
	if !j.closing && j.failed == nil {
		j.timer = j.opts.Clock.AfterFunc(j.opts.Sync.interval, j.tick)
	}
	j.mu.Unlock()
}

func (j *Journal) usableLocked() error {
	if j.failed != nil {
		return j.failed
	}
	if j.closing {
		return ErrClosed
	}
	return nil
}

// Close flushes and fsyncs what was appended, stops the background work
// (an automatic compaction in progress is abandoned, removing nothing),
// closes the files and releases the directory lock. It returns the error
// that failed the journal, if any. Later calls return ErrClosed. Do not
// call Close while holding a lock Options.Snapshot takes.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closing {
		j.mu.Unlock()
		return ErrClosed
	}
	j.closing = true
	j.closed.Store(true)
	if j.timer != nil {
		j.timer.Stop()
	}
	j.wake.Signal()
	j.space.Broadcast()
	j.mu.Unlock()

	close(j.stop)
	if j.compactorDone != nil {
		<-j.compactorDone
	}
	// Wait for an explicit Compact to notice the close and give up.
	j.waitCompaction()
	<-j.writerDone

	err := j.closeErr
	j.mu.Lock()
	if err == nil && j.failed != nil {
		err = j.failed
	}
	j.mu.Unlock()
	if uerr := unlockDir(j.lock); err == nil && uerr != nil {
		err = fmt.Errorf("journal: release lock: %w", uerr)
	}
	return err
}

// Stats returns the current counters.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := Stats{
		Segments:        len(j.segs),
		Appends:         j.appends,
		Writes:          j.writes.Load(),
		Syncs:           j.syncs.Load(),
		LastSyncLatency: time.Duration(j.lastSyncLat.Load()),
		Compactions:     j.compactions,
		CompactedBytes:  j.compactedBytes,
		CopiedBytes:     j.copiedBytes,
		LiveBytes:       j.lastLive,
		Err:             j.failed,
	}
	for _, seg := range j.segs {
		s.Bytes += seg.size
	}
	return s
}

// Dir returns the journal's directory.
func (j *Journal) Dir() string { return j.dir }
