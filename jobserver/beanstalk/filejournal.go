package beanstalk

import (
	"errors"
	"path/filepath"

	"github.com/jobgate/jobgate/jobserver/journal"
)

// JournalDir is the subdirectory of the data directory that holds the
// Beanstalk engine's journal; each engine has its own.
const JournalDir = "beanstalk"

// FileJournal is the Beanstalk engine's journal on disk: a journal.Journal
// plus the state replayed from it, kept until the engine takes it over
// (Config.Journal, Attach). Attach, Restored (for the start-up log line),
// Journal, WriteQueued and Close are journal.Handoff's.
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
	*handoff
}

// handoff lets FileJournal embed journal.Handoff as an unexported field.
type handoff = journal.Handoff

var _ Journal = (*FileJournal)(nil)

// errAttached is returned by a second Attach: one journal serves one
// engine.
var errAttached = errors.New("beanstalk: journal already attached to an engine")

// handoffRules says how the engine's records replay: a job's Update
// replaces its header, and key 0 is the id counter.
var handoffRules = journal.HandoffRules{ErrAttached: errAttached, Merge: mergeUpdate, Counter: restoredCounter}

// OpenJournal opens (creating it if needed) the journal in
// dataDir/JournalDir and replays it. opts is passed to journal.Open, except
// Snapshot, which the engine provides. The report says what was found on
// disk, damage included (damage is logged to opts.Logger and is not an
// error). Pass the FileJournal as Config.Journal to exactly one engine,
// and Close it after the engine is done (BeanstalkServer.Shutdown).
func OpenJournal(dataDir string, opts journal.Options) (*FileJournal, journal.ReplayReport, error) {
	h, rep, err := journal.OpenHandoff(filepath.Join(dataDir, JournalDir), opts, handoffRules)
	if err != nil {
		return nil, rep, err
	}
	return &FileJournal{h}, rep, nil
}

// mergeUpdate returns a job's Full record with its latest Update applied:
// the Update's header, then the Full record's body.
func mergeUpdate(full, upd []byte) ([]byte, error) {
	old, err := decodeRecord(full, false)
	if err != nil {
		return nil, err
	}
	if _, err := decodeRecord(upd, false); err != nil {
		return nil, err
	}
	d := make([]byte, 0, len(upd)+len(full)-old.hdrLen)
	return append(append(d, upd...), full[old.hdrLen:]...), nil
}

// restoredCounter is the id counter record Attach restores. Ids must not
// be reused: the counter goes past every key the log still mentions,
// deleted ones included (the counter record covers those compaction
// removed).
func restoredCounter(maxKey uint64, rec []byte) []byte {
	if n, err := decodeCounterRecord(rec); err == nil {
		maxKey = max(maxKey, n)
	}
	return appendCounterRecord(nil, maxKey)
}

// AppendAsync queues rec (see Journal).
func (fj *FileJournal) AppendAsync(rec journal.Record) (Ticket, error) {
	return ticket(fj.Journal().AppendAsync(rec))
}

// AppendQuiet queues rec without waking the writer (see QuietJournal).
func (fj *FileJournal) AppendQuiet(rec journal.Record) (Ticket, error) {
	return ticket(fj.Journal().AppendQuiet(rec))
}

// ticket returns a nil Ticket on error, not a zero journal.Ticket.
func ticket(t journal.Ticket, err error) (Ticket, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}
