package gearman

import (
	"testing"

	"github.com/jobgate/jobgate/jobserver/clock"
)

// TestFileJournalServesOneEngine: a second engine on the same FileJournal
// fails with the engine's own error.
func TestFileJournalServesOneEngine(t *testing.T) {
	_, _, fj := openJournaled(t, t.TempDir(), clock.NewFake(epoch0))
	_, err := New(Config{Clock: clock.NewFake(epoch0), HandlePrefix: "H:t", Journal: fj})
	if want := "gearman: journal already attached to an engine"; err == nil || err.Error() != want {
		t.Fatalf("second New: %v, want %q", err, want)
	}
}
