package gearman

import (
	"encoding/binary"
	"errors"
	"path/filepath"

	"github.com/jobgate/jobgate/jobserver/journal"
)

// JournalDir is the subdirectory of the data directory that holds the
// Gearman engine's journal; each engine has its own.
const JournalDir = "gearman"

// FileJournal is the Gearman engine's journal on disk: a journal.Journal
// plus the state replayed from it, kept until the engine takes it over
// (Config.Journal, Attach). Attach, Restored (for the start-up log line),
// Journal, WriteQueued and Close are journal.Handoff's.
//
// Use (cmd/jobgate):
//
//	fj, rep, err := gearman.OpenJournal(dataDir, journal.Options{Sync: policy, Logger: log})
//	cfg.Engine.Journal = fj // proxy.GearmanConfig
//	srv, err := proxy.NewGearmanServer(cfg) // replays into the engine
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
var errAttached = errors.New("gearman: journal already attached to an engine")

// handoffRules says how the engine's records replay: the engine writes no
// Update records (one is ignored), and key 0 is the handle counter.
var handoffRules = journal.HandoffRules{ErrAttached: errAttached, Counter: restoredCounter}

// OpenJournal opens (creating it if needed) the journal in
// dataDir/JournalDir and replays it. opts is passed to journal.Open, except
// Snapshot, which the engine provides. The report says what was found on
// disk, damage included (damage is logged to opts.Logger and is not an
// error). Pass the FileJournal as Config.Journal to exactly one engine,
// and Close it after the engine's Stop (GearmanServer.Shutdown).
func OpenJournal(dataDir string, opts journal.Options) (*FileJournal, journal.ReplayReport, error) {
	h, rep, err := journal.OpenHandoff(filepath.Join(dataDir, JournalDir), opts, handoffRules)
	if err != nil {
		return nil, rep, err
	}
	return &FileJournal{h}, rep, nil
}

// restoredCounter is the handle counter record Attach restores. Handles
// must not be reused: the counter goes past every key the log still
// mentions, deleted ones included (the counter record covers those
// compaction removed). A log that mentions no job keeps its counter record
// as it is.
func restoredCounter(maxKey uint64, rec []byte) []byte {
	if maxKey == 0 {
		return rec
	}
	if len(rec) > 1 {
		if n, k := binary.Uvarint(rec[1:]); k > 0 {
			maxKey = max(maxKey, n)
		}
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
