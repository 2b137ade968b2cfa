package gearman

import (
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// openQuiet starts an engine on a journal in dir under policy.
func openQuiet(t *testing.T, dir string, policy journal.SyncPolicy) (*harness, *FileJournal) {
	t.Helper()
	fj, _, err := OpenJournal(dir, journal.Options{Sync: policy, Clock: clock.NewFake(epoch0), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fj.Close() }) // after the harness's Stop
	return newHarness(t, Config{Clock: clock.NewFake(epoch0), Journal: fj}), fj
}

// TestWriteQueuedReleasesHeldOutput: for a session an event loop serves,
// a background job's record waits for the loop's WriteQueued, which writes
// it on the loop's goroutine and releases the JOB_CREATED it held, in
// order with what followed, before it returns; the job is then a worker's.
// After a restart the job is there.
func TestWriteQueuedReleasesHeldOutput(t *testing.T) {
	for _, policy := range []journal.SyncPolicy{journal.Never, journal.Interval(time.Hour)} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			h, fj := openQuiet(t, dir, policy)
			c := h.open()
			c.s.SetLoopWrites()
			c.send(codec.SubmitJobBg, "f", "", "data")
			c.send(codec.EchoReq, "after")
			c.expect() // held: the record is not written yet
			h.e.WriteQueued()
			c.expect("JOB_CREATED H:t:1", "ECHO_RES after")
			w := h.open()
			w.send(codec.CanDo, "f")
			w.send(codec.GrabJob)
			w.expect("JOB_ASSIGN H:t:1 f data")
			h.e.Stop()
			fj.Close()

			again, _ := openQuiet(t, dir, policy)
			w2 := again.open()
			w2.send(codec.CanDo, "f")
			w2.send(codec.GrabJob)
			w2.expect("JOB_ASSIGN H:t:1 f data")
		})
	}
}

// TestWriteQueuedAlways: under the always policy WriteQueued leaves the
// write (and its fsync) to the journal's writer, and the completer
// releases the held reply once it is durable.
func TestWriteQueuedAlways(t *testing.T) {
	h, _ := openQuiet(t, t.TempDir(), journal.Always)
	c := h.open()
	c.s.SetLoopWrites()
	for _, want := range []string{"JOB_CREATED H:t:1", "JOB_CREATED H:t:2"} {
		c.send(codec.SubmitJobBg, "f", "", "data")
		h.e.WriteQueued()
		if got := c.await(1); got[0] != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}
