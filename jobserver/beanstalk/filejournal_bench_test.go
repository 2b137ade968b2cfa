package beanstalk

import (
	"testing"

	"github.com/jobgate/jobgate/jobserver/journal"
)

// BenchmarkFileJournalAppend measures the engine's per-job journal call
// through its interfaces: AppendAsync, and AppendQuiet with WriteQueued
// every 64 records as the event loop does at the end of a batch. Its
// allocs/op must stay 0: the FileJournal wrapper adds nothing per record.
func BenchmarkFileJournalAppend(b *testing.B) {
	for _, quiet := range []bool{false, true} {
		name := "async"
		if quiet {
			name = "quiet"
		}
		b.Run(name, func(b *testing.B) {
			fj, _, err := OpenJournal(b.TempDir(), journal.Options{Sync: journal.Never, Logger: quietLog})
			if err != nil {
				b.Fatal(err)
			}
			defer fj.Close()
			var qj QuietJournal = fj
			rec := journal.Record{Kind: journal.Full, Data: make([]byte, 100)}
			b.ReportAllocs()
			for b.Loop() {
				rec.Key++
				if quiet {
					_, err = qj.AppendQuiet(rec)
					if rec.Key%64 == 0 {
						qj.WriteQueued()
					}
				} else {
					_, err = qj.AppendAsync(rec)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
