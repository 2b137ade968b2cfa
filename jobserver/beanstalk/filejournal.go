package beanstalk

import (
	"errors"
	"path/filepath"
	"sync"

	"github.com/jobgate/jobgate/jobserver/journal"
)

// JournalDir is the subdirectory of the data directory that holds the
// Beanstalk engine's journal; each engine has its own.
const JournalDir = "beanstalk"

// FileJournal is the Beanstalk engine's journal on disk: a journal.Journal
// plus the state replayed from it, kept until the engine takes it over
// (Config.Journal, Attach).
//
// Use (cmd/jobgate):
//
//	fj, rep, err := beanstalk.OpenJournal(dataDir, journal.Options{Sync: policy, Logger: log})
//	cfg.EngineConfig.Journal = fj // proxy.BeanstalkConfig
//	srv, err := proxy.NewBeanstalkServer(cfg) // replays into the engine
//	log.Info("jobs restored", "jobs", fj.Restored())
//	...
//	srv.Shutdown(ctx)
//	fj.Close()
type FileJournal struct {
	j *journal.Journal

	mu       sync.Mutex
	live     map[uint64]replayed                     // guarded by mu; replayed state until Attach
	maxKey   uint64                                  // guarded by mu; the highest key of any replayed record
	snap     func(key uint64, put func(data []byte)) // guarded by mu; the engine's, after Attach
	attached bool                                    // guarded by mu
	restored int                                     // guarded by mu; jobs handed to the engine
}

// replayed is one live key during replay: its latest Full record and the
// header of its latest Update since, if any (an Update replaces the
// header, so only the latest matters).
type replayed struct {
	full, upd []byte
}

var _ Journal = (*FileJournal)(nil)

// errAttached is returned by a second Attach: one journal serves one
// engine.
var errAttached = errors.New("beanstalk: journal already attached to an engine")

// OpenJournal opens (creating it if needed) the journal in
// dataDir/JournalDir and replays it. opts is passed to journal.Open, except
// Snapshot, which the engine provides. The report says what was found on
// disk, damage included (damage is logged to opts.Logger and is not an
// error). Pass the FileJournal as Config.Journal to exactly one engine,
// and Close it after the engine is done (BeanstalkServer.Shutdown).
func OpenJournal(dataDir string, opts journal.Options) (*FileJournal, journal.ReplayReport, error) {
	fj := &FileJournal{live: make(map[uint64]replayed)}
	opts.Snapshot = fj.snapshot
	j, rep, err := journal.Open(filepath.Join(dataDir, JournalDir), opts, fj.replay)
	if err != nil {
		return nil, rep, err
	}
	fj.j = j
	return fj, rep, nil
}

// replay applies one record by the rules of package journal. It runs
// inside OpenJournal, before any other goroutine can see fj.
func (fj *FileJournal) replay(r journal.Record) error {
	fj.maxKey = max(fj.maxKey, r.Key)
	switch r.Kind {
	case journal.Full:
		fj.live[r.Key] = replayed{full: append([]byte(nil), r.Data...)} // r.Data is reused
	case journal.Update:
		if s, ok := fj.live[r.Key]; ok {
			s.upd = append(s.upd[:0], r.Data...)
			fj.live[r.Key] = s
		}
	case journal.Delete:
		delete(fj.live, r.Key)
	}
	return nil
}

// merged returns the Full record of s with its Update applied.
func (s *replayed) merged() ([]byte, error) {
	if s.upd == nil {
		return s.full, nil
	}
	old, err := decodeRecord(s.full, false)
	if err != nil {
		return nil, err
	}
	if _, err := decodeRecord(s.upd, false); err != nil {
		return nil, err
	}
	d := make([]byte, 0, len(s.upd)+len(s.full)-old.hdrLen)
	return append(append(d, s.upd...), s.full[old.hdrLen:]...), nil
}

// Attach hands the replayed state to the engine (see Journal).
func (fj *FileJournal) Attach(restore func(key uint64, data []byte) error, snapshot func(key uint64, put func(data []byte))) error {
	fj.mu.Lock()
	defer fj.mu.Unlock()
	if fj.attached {
		return errAttached
	}
	// Ids must not be reused: the counter goes past every key the log
	// still mentions, deleted ones included (the counter record covers
	// those compaction removed).
	if c, ok := fj.live[counterKey]; ok {
		if n, err := decodeCounterRecord(c.full); err == nil {
			fj.maxKey = max(fj.maxKey, n)
		}
	}
	if err := restore(counterKey, appendCounterRecord(nil, fj.maxKey)); err != nil {
		return err
	}
	for k, s := range fj.live {
		if k == counterKey {
			continue
		}
		d, err := s.merged()
		if err == nil {
			err = restore(k, d)
		}
		if err != nil {
			return err
		}
		delete(fj.live, k) // let the engine's copy be the only one
		fj.restored++
	}
	fj.live = nil
	fj.snap = snapshot
	fj.attached = true
	return nil
}

// snapshot is the journal's compaction callback: the engine's once
// attached, the replayed state before (a compaction cannot run before
// anything is appended, but if one did it must not lose a job).
func (fj *FileJournal) snapshot(key uint64, put func(data []byte)) {
	fj.mu.Lock()
	if f := fj.snap; f != nil {
		fj.mu.Unlock()
		f(key, put)
		return
	}
	defer fj.mu.Unlock()
	if s, ok := fj.live[key]; ok {
		if d, err := s.merged(); err == nil {
			put(d)
		}
	}
}

// AppendAsync queues rec (see Journal).
func (fj *FileJournal) AppendAsync(rec journal.Record) (Ticket, error) {
	t, err := fj.j.AppendAsync(rec)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// AppendQuiet queues rec without waking the writer (see QuietJournal).
func (fj *FileJournal) AppendQuiet(rec journal.Record) (Ticket, error) {
	t, err := fj.j.AppendQuiet(rec)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// WriteQueued writes what is queued on the caller's goroutine when it
// needs no fsync (see QuietJournal).
func (fj *FileJournal) WriteQueued() bool { return fj.j.WriteQueued() }

// Restored returns the number of jobs the engine got back from the
// journal (0 before New), for the start-up log line.
func (fj *FileJournal) Restored() int {
	fj.mu.Lock()
	defer fj.mu.Unlock()
	return fj.restored
}

// Journal returns the underlying journal, for Stats, Sync and Compact.
func (fj *FileJournal) Journal() *journal.Journal { return fj.j }

// Close flushes, fsyncs and closes the journal (journal.Journal.Close).
func (fj *FileJournal) Close() error { return fj.j.Close() }
