package beanstalk

import (
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// TestExecAsyncWriteQueued: with a journal on disk under a policy that
// fsyncs nothing per write, the records of ExecAsync's changes wait for
// the event loop's WriteQueued, which writes them on its own goroutine and
// finishes their commands before it returns: the put is answered, its job
// ready, and the delete answered, with no other goroutine involved. After a
// restart, what was acknowledged is there.
func TestExecAsyncWriteQueued(t *testing.T) {
	for _, policy := range []journal.SyncPolicy{journal.Never, journal.Interval(time.Hour)} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			in := openDurable(t, dir, time.Unix(1000, 0), journal.Options{Sync: policy, Clock: clock.NewFake(time.Unix(0, 0))})
			p := newAsyncConn(t, in.e)
			c := newAsyncConn(t, in.e)

			var ids []uint64
			for _, body := range []string{"one", "two"} {
				if _, ok := p.exec(wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte(body)}); ok {
					t.Fatal("a journaled put was answered before its record was written")
				}
				in.e.WriteQueued()
				select {
				case <-p.notify:
				default:
					t.Fatal("WriteQueued returned before notifying the put's session")
				}
				var r wire.Reply
				if !p.s.Result(&r) || r.Kind != wire.Inserted {
					t.Fatalf("put: %+v, want INSERTED at once after WriteQueued", r)
				}
				ids = append(ids, r.ID)
			}
			if r, ok := c.exec(wire.Command{Verb: wire.ReserveWithTimeout, Timeout: 0}); !ok || r.Kind != wire.Reserved || r.ID != ids[0] {
				t.Fatalf("reserve: %+v (done %v), want job %d", r, ok, ids[0])
			}
			if _, ok := c.exec(wire.Command{Verb: wire.Delete, ID: ids[0]}); ok {
				t.Fatal("a journaled delete was answered before its record was written")
			}
			in.e.WriteQueued()
			var r wire.Reply
			if !c.s.Result(&r) || r.Kind != wire.Deleted {
				t.Fatalf("delete: %+v, want DELETED at once after WriteQueued", r)
			}

			in.stop()
			again := openDurable(t, dir, time.Unix(2000, 0), journal.Options{Sync: policy, Clock: clock.NewFake(time.Unix(0, 0))})
			a := newAsyncConn(t, again.e)
			if r, ok := a.exec(wire.Command{Verb: wire.PeekReady}); !ok || r.Kind != wire.Found || r.ID != ids[1] {
				t.Fatalf("after restart, peek-ready: %+v, want job %d (and job %d deleted)", r, ids[1], ids[0])
			}
		})
	}
}

// TestExecAsyncWriteQueuedAlways: under the always policy WriteQueued
// cannot write on the loop (the write needs an fsync); it hands the
// records to the journal's writer and the completer, which answer the
// command through notify once it is durable.
func TestExecAsyncWriteQueuedAlways(t *testing.T) {
	in := openDurable(t, t.TempDir(), time.Unix(1000, 0), journal.Options{Sync: journal.Always})
	p := newAsyncConn(t, in.e)
	for i := range 3 {
		if _, ok := p.exec(wire.Command{Verb: wire.Put, Pri: 1, TTR: 60, Body: []byte("x")}); ok {
			t.Fatal("a journaled put was answered before its record was written")
		}
		in.e.WriteQueued()
		if r := p.await(); r.Kind != wire.Inserted || r.ID != uint64(i+1) {
			t.Fatalf("put %d: %+v", i, r)
		}
	}
}
