package journal

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

// Defaults for the zero Options.
const (
	// DefaultSegmentSize is the default Options.SegmentSize: 64 MiB.
	DefaultSegmentSize = 64 << 20
	// DefaultSyncInterval is the interval of the default policy,
	// Interval(DefaultSyncInterval), and of Interval(0).
	DefaultSyncInterval = 50 * time.Millisecond
	// DefaultMaxRecordSize is the default Options.MaxRecordSize: 64 MiB.
	DefaultMaxRecordSize = 64 << 20
	// DefaultMaxPending is the default Options.MaxPending: 8 MiB.
	DefaultMaxPending = 8 << 20
	// DefaultCompactRatio is the default Options.CompactRatio.
	DefaultCompactRatio = 2.0
)

// MinSegmentSize is the smallest SegmentSize Open accepts; tests use sizes
// this small to make rotation and compaction happen often.
const MinSegmentSize = 1 << 10

// SyncPolicy says when the journal fsyncs, like beanstalkd's -f and -F.
// Writes are always issued in Append order whatever the policy. The zero
// value is Interval(DefaultSyncInterval).
type SyncPolicy struct {
	mode     syncMode
	interval time.Duration
}

type syncMode uint8

const (
	modeDefault syncMode = iota
	modeAlways
	modeInterval
	modeNever
)

var (
	// Always fsyncs before acknowledging: Append returns only once an fsync
	// that covers its record has finished. Concurrent appends share one
	// write and one fsync (group commit), so the cost per record falls as
	// writers are added.
	Always = SyncPolicy{mode: modeAlways}
	// Never leaves flushing to the operating system: Append returns once its
	// record is written to the file, which survives a crash of the process
	// but not of the machine. The journal still fsyncs when it seals or
	// creates a segment, on Sync, during compaction and on Close, so damage
	// after a power loss is confined to the newest segment.
	Never = SyncPolicy{mode: modeNever}
)

// Interval returns the policy that acknowledges like Never and fsyncs the
// newest segment every d (when something was written), so a power loss
// loses at most about d of acknowledged records. d <= 0 means
// DefaultSyncInterval.
func Interval(d time.Duration) SyncPolicy {
	if d <= 0 {
		d = DefaultSyncInterval
	}
	return SyncPolicy{mode: modeInterval, interval: d}
}

func (p SyncPolicy) normalize() SyncPolicy {
	if p.mode == modeDefault || (p.mode == modeInterval && p.interval <= 0) {
		return Interval(DefaultSyncInterval)
	}
	return p
}

// String returns "always", "never" or "interval(50ms)".
func (p SyncPolicy) String() string {
	p = p.normalize()
	switch p.mode {
	case modeAlways:
		return "always"
	case modeNever:
		return "never"
	}
	return fmt.Sprintf("interval(%s)", p.interval)
}

// Options configures Open. Every zero field means its default.
type Options struct {
	// SegmentSize is the size at which the newest segment is sealed and a
	// new one started (DefaultSegmentSize). A segment is larger only when
	// one record is. Compaction works in whole segments, so it also sets
	// the slack of the disk bound.
	SegmentSize int64
	// Sync is the fsync policy (Interval(DefaultSyncInterval)).
	Sync SyncPolicy
	// MaxRecordSize bounds the Data of one record (DefaultMaxRecordSize).
	// It limits Append only; replay reads any well-formed record.
	MaxRecordSize int
	// MaxPending bounds the bytes queued for the writer (DefaultMaxPending);
	// past it Append and AppendAsync wait, so a slow disk pushes back on
	// the engine instead of growing memory.
	MaxPending int64
	// Snapshot lets compaction ask the engine for the current state of a
	// key whose records are in segments about to be removed. If key is
	// live, Snapshot must call put exactly once, before it returns, with
	// the key's full state (as a Full record's Data), and do so under the
	// lock (or on the goroutine) that orders the engine's own appends for
	// that key, so the fresh record cannot overtake or fall behind one of
	// them; if the key is gone it must not call put. put copies data and
	// does not wait for the disk (only, like AppendAsync, for room when
	// MaxPending bytes are queued). Snapshot is called from the compaction
	// goroutine, or from Compact's caller, with no journal lock held, for
	// every key that has a Full record in those segments, live or not.
	// Without Snapshot there is no compaction and the journal grows
	// without bound.
	Snapshot func(key uint64, put func(data []byte))
	// CompactRatio: automatic compaction runs, at a segment rotation, once
	// the sealed segments hold more than CompactRatio times the bytes the
	// previous compaction found live (and at least one segment). Default
	// DefaultCompactRatio; must be > 1. Higher trades disk for less
	// rewriting.
	CompactRatio float64
	// NoAutoCompact turns off compaction at rotation; Compact still works.
	NoAutoCompact bool
	// Logger receives damage reports and background errors
	// (slog.Default()).
	Logger *slog.Logger
	// Clock drives the Interval policy's fsync timer and the fsync latency
	// in Stats (clock.Real{}).
	Clock clock.Clock
	// OnSync, if not nil, is called after each fsync of a segment file
	// with how long it took (on the goroutine that synced): a latency
	// histogram (metrics.ObserveFsync). It must be quick.
	OnSync func(time.Duration)

	// syncFile, syncDir and remove let tests count fsyncs, skip them and
	// inject failures.
	syncFile func(*os.File) error
	syncDir  func(string) error
	remove   func(string) error
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.SegmentSize < MinSegmentSize {
		return o, fmt.Errorf("journal: SegmentSize %d is below the minimum %d", o.SegmentSize, MinSegmentSize)
	}
	o.Sync = o.Sync.normalize()
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = DefaultMaxRecordSize
	}
	if o.MaxRecordSize < 0 || int64(o.MaxRecordSize) > 1<<32-1 {
		return o, fmt.Errorf("journal: MaxRecordSize %d is out of range", o.MaxRecordSize)
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxPending < 0 {
		return o, fmt.Errorf("journal: MaxPending %d is negative", o.MaxPending)
	}
	if o.CompactRatio == 0 {
		o.CompactRatio = DefaultCompactRatio
	}
	if o.CompactRatio <= 1 {
		return o, fmt.Errorf("journal: CompactRatio %g must be above 1", o.CompactRatio)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.syncFile == nil {
		o.syncFile = (*os.File).Sync
	}
	if o.syncDir == nil {
		o.syncDir = syncDir
	}
	if o.remove == nil {
		o.remove = os.Remove
	}
	return o, nil
}
