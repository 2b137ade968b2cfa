package beanstalk

import (
	"testing"

	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// TestFileJournalServesOneEngine: a second engine on the same FileJournal
// fails with the engine's own error, and the first keeps the journal.
func TestFileJournalServesOneEngine(t *testing.T) {
	in := openDurable(t, t.TempDir(), testStart, journal.Options{})
	_, err := New(Config{Clock: clock.NewFake(testStart), System: &testSystem, Journal: in.fj})
	const want = "beanstalk: restore: beanstalk: journal already attached to an engine"
	if err == nil || err.Error() != want {
		t.Fatalf("second New: %v, want %q", err, want)
	}
}
