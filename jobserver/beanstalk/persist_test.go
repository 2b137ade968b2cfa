package beanstalk

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/journal"
)

var quietLog = slog.New(slog.DiscardHandler)

// incarnation is one run of an engine on a journal directory, on its own
// fake clock (so a dead incarnation's timers never fire again).
type incarnation struct {
	e  *Engine
	fj *FileJournal
	fc *clock.Fake
}

// openDurable starts an engine on dir at wall time at. The engine and the
// journal are closed at the end of the test if stop was not called.
func openDurable(t *testing.T, dir string, at time.Time, opts journal.Options) *incarnation {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLog
	}
	fj, _, err := OpenJournal(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(at)
	sys := testSystem
	e, err := New(Config{Clock: fc, System: &sys, Journal: fj})
	if err != nil {
		fj.Close()
		t.Fatal(err)
	}
	in := &incarnation{e: e, fj: fj, fc: fc}
	t.Cleanup(in.stop)
	return in
}

// stop closes the engine and its journal, as a clean shutdown does; the
// sessions are left open, as a crash leaves them.
func (in *incarnation) stop() {
	in.e.Close()
	in.fj.Close()
}

func (c *conn) putIn(tube string, pri, delay, ttr uint32, body string) uint64 {
	c.t.Helper()
	c.use(tube)
	return c.put(pri, delay, ttr, body)
}

// jobState returns stats-job's state, pri and time-left of id, or "gone".
func (c *conn) jobState(id uint64) string {
	c.t.Helper()
	r := c.id(wire.StatsJob, id)
	if r.Kind == wire.NotFound {
		return "gone"
	}
	m := parseYAMLMap(c.t, string(r.Body))
	return fmt.Sprintf("%s %s pri=%s left=%s", m["tube"], m["state"], m["pri"], m["time-left"])
}

// TestJournalReplaysEveryTransition makes each journaled change, restarts
// a minute later, and checks every job's state, priority, delay left and
// body, and that ids continue after the highest.
func TestJournalReplaysEveryTransition(t *testing.T) {
	dir := t.TempDir()
	in := openDurable(t, dir, testStart, journal.Options{Sync: journal.Always})
	c := newConn(t, in.e)
	ready := c.putIn("a", 5, 0, 30, "ready")
	delayed := c.putIn("a", 6, 100, 30, "delayed")
	reserved := c.putIn("b", 7, 0, 30, "reserved")
	released := c.putIn("c", 8, 0, 30, "released")
	buried := c.putIn("d", 9, 0, 30, "buried")
	kicked := c.putIn("e", 10, 0, 30, "kicked")
	kickJob := c.putIn("f", 11, 200, 30, "kick-job")
	deleted := c.putIn("g", 12, 0, 30, "deleted")

	w := newConn(t, in.e)
	prev := "default"
	reserveFrom := func(tube string) uint64 {
		w.watch(tube)
		w.ignore(prev)
		prev = tube
		id, _ := w.reserveNow()
		return id
	}
	if id := reserveFrom("b"); id != reserved {
		t.Fatalf("reserved %d, want %d", id, reserved)
	}
	reserveFrom("c")
	w.want(wire.Command{Verb: wire.Release, ID: released, Pri: 18, Delay: 50}, wire.Released)
	reserveFrom("d")
	w.want(wire.Command{Verb: wire.Bury, ID: buried, Pri: 19}, wire.Buried)
	reserveFrom("e")
	w.want(wire.Command{Verb: wire.Bury, ID: kicked, Pri: 20}, wire.Buried)
	c.use("e")
	c.want(wire.Command{Verb: wire.Kick, Bound: 10}, wire.KickedCount)
	c.want(wire.Command{Verb: wire.KickJob, ID: kickJob}, wire.Kicked)
	c.want(wire.Command{Verb: wire.Delete, ID: deleted}, wire.Deleted)
	in.fc.Advance(10 * time.Second)
	in.stop()

	// A minute after the puts: the release's 50 s delay has run out, the
	// put's 100 s delay has 40 s left.
	in = openDurable(t, dir, testStart.Add(time.Minute), journal.Options{Sync: journal.Always})
	if n := in.fj.Restored(); n != 7 {
		t.Errorf("restored %d jobs, want 7", n)
	}
	c = newConn(t, in.e)
	want := map[uint64]string{
		ready:    "a ready pri=5 left=0",
		delayed:  "a delayed pri=6 left=40",
		reserved: "b ready pri=7 left=0",
		released: "c ready pri=18 left=0",
		buried:   "d buried pri=19 left=0",
		kicked:   "e ready pri=20 left=0",
		kickJob:  "f ready pri=11 left=0",
		deleted:  "gone",
	}
	bodies := map[uint64]string{ready: "ready", delayed: "delayed", reserved: "reserved",
		released: "released", buried: "buried", kicked: "kicked", kickJob: "kick-job"}
	for id, w := range want {
		if got := c.jobState(id); got != w {
			t.Errorf("job %d: %s, want %s", id, got, w)
		}
		if b, ok := bodies[id]; ok {
			if r := c.id(wire.Peek, id); string(r.Body) != b {
				t.Errorf("job %d body %q, want %q", id, r.Body, b)
			}
		}
	}
	if got := c.statsMap(wire.Command{Verb: wire.StatsJob, ID: released})["releases"]; got != "1" {
		t.Errorf("releases counter %s after replay, want 1", got)
	}
	if id := c.put(0, 0, 1, "next"); id != deleted+1 {
		t.Errorf("next id %d, want %d", id, deleted+1)
	}
	// The delay left is honoured on the new clock.
	in.fc.Advance(39 * time.Second)
	if got := c.jobState(delayed); got != "a delayed pri=6 left=1" {
		t.Errorf("after 39 s: %s", got)
	}
	in.fc.Advance(time.Second)
	if got := c.jobState(delayed); got != "a ready pri=6 left=0" {
		t.Errorf("after 40 s: %s", got)
	}
}

// TestJournalBuriedOrder: the buried FIFO keeps its order over restarts.
func TestJournalBuriedOrder(t *testing.T) {
	dir := t.TempDir()
	in := openDurable(t, dir, testStart, journal.Options{Sync: journal.Never})
	c := newConn(t, in.e)
	ids := []uint64{c.put(3, 0, 9, "x"), c.put(1, 0, 9, "y"), c.put(2, 0, 9, "z")}
	for range ids {
		id, _ := c.reserveNow()
		c.want(wire.Command{Verb: wire.Bury, ID: id, Pri: 1}, wire.Buried)
	}
	in.stop()
	for round := 0; round < 2; round++ {
		in = openDurable(t, dir, testStart, journal.Options{Sync: journal.Never})
		c = newConn(t, in.e)
		// Reserved order: pri 1, 2, 3 -> ids[1], ids[2], ids[0].
		for _, want := range []uint64{ids[1], ids[2], ids[0]} {
			if r := c.do(wire.Command{Verb: wire.PeekBuried}); r.ID != want {
				t.Fatalf("round %d: peek-buried %d, want %d", round, r.ID, want)
			}
			c.want(wire.Command{Verb: wire.ReserveJob, ID: want}, wire.Reserved)
			c.want(wire.Command{Verb: wire.Bury, ID: want, Pri: 1}, wire.Buried)
		}
		in.fj.Journal().Compact()
		in.stop()
	}
}

// TestJournalIDsNeverReused: ids continue after the highest ever issued,
// even when every record of the deleted jobs has been compacted away.
func TestJournalIDsNeverReused(t *testing.T) {
	dir := t.TempDir()
	in := openDurable(t, dir, testStart, journal.Options{Sync: journal.Never, SegmentSize: journal.MinSegmentSize})
	c := newConn(t, in.e)
	var last uint64
	for range 100 {
		last = c.put(0, 0, 1, "abcdefghijklmnopqrstuvwxyz")
		c.want(wire.Command{Verb: wire.Delete, ID: last}, wire.Deleted)
	}
	if err := in.fj.Journal().Compact(); err != nil {
		t.Fatal(err)
	}
	in.stop()
	for range 2 {
		in = openDurable(t, dir, testStart, journal.Options{Sync: journal.Never, SegmentSize: journal.MinSegmentSize})
		c = newConn(t, in.e)
		if id := c.put(0, 0, 1, "next"); id != last+1 {
			t.Fatalf("id %d after restart, want %d", id, last+1)
		}
		last++
		c.want(wire.Command{Verb: wire.Delete, ID: last}, wire.Deleted)
		if err := in.fj.Journal().Compact(); err != nil {
			t.Fatal(err)
		}
		in.stop()
	}
}

// dirSize returns the bytes of the segment files in dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".jnl" {
			if fi, err := e.Info(); err == nil { // compaction may have removed it
				n += fi.Size()
			}
		}
	}
	return n
}

// TestJournalCompactionChurn cycles a steady set of jobs through
// release-with-delay and TTR expiry with small segments: the directory
// stays bounded by the live data, and a restart gives exactly the live set.
func TestJournalCompactionChurn(t *testing.T) {
	dir := t.TempDir()
	opts := journal.Options{Sync: journal.Never, SegmentSize: 4 << 10}
	in := openDurable(t, dir, testStart, opts)
	c := newConn(t, in.e)
	const live = 40
	body := string(make([]byte, 100))
	want := map[uint64]bool{}
	for range live {
		want[c.put(0, 0, 1, body)] = true
	}
	jdir := filepath.Join(dir, JournalDir)
	var most int64
	for round := range 300 {
		// Half released with a delay, half left to time out.
		for i := range live {
			id, _ := c.reserveNow()
			if i%2 == 0 {
				c.want(wire.Command{Verb: wire.Release, ID: id, Pri: uint32(round), Delay: 1}, wire.Released)
			}
		}
		in.fc.Advance(2 * time.Second) // TTRs run out, delays end
		// Replace a job now and then, so deletes and puts churn too.
		if round%10 == 0 {
			for id := range want {
				c.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
				delete(want, id)
				break
			}
			want[c.put(0, 0, 1, body)] = true
		}
		in.fj.Journal().SettleCompaction()
		most = max(most, dirSize(t, jdir))
	}
	// The live state is ~live*170 bytes; the bound of package journal is
	// (ratio+1) x live + 2 segments, measured with the compactor at rest.
	// One more segment of slack covers the head being filled.
	if limit := int64(3*live*200 + 3*opts.SegmentSize); most > limit {
		t.Errorf("journal directory reached %d bytes, want <= %d", most, limit)
	}
	st := in.fj.Journal().Stats()
	if st.Compactions == 0 {
		t.Errorf("no compaction ran: %+v", st)
	}
	t.Logf("max directory %d bytes; %+v", most, st)
	in.stop()

	in = openDurable(t, dir, in.fc.Now().Add(time.Second), opts)
	c = newConn(t, in.e)
	got := map[uint64]bool{}
	for {
		r, _ := c.reserveTimeout(0)
		if r.Kind != wire.Reserved {
			break
		}
		if got[r.ID] {
			t.Fatalf("job %d twice", r.ID)
		}
		got[r.ID] = true
	}
	if len(got) != len(want) {
		t.Errorf("restored %d jobs, want %d", len(got), len(want))
	}
	for id := range want {
		if !got[id] {
			t.Errorf("job %d lost", id)
		}
	}
}

// memJournal is a Journal in memory whose tickets a test controls.
type memJournal struct {
	mu   sync.Mutex
	recs []journal.Record
	fail error         // appends fail at once with this
	gate chan struct{} // tickets complete when it is closed (nil: at once)
	werr error         // tickets complete with this
}

func (m *memJournal) Attach(func(uint64, []byte) error, func(uint64, func([]byte))) error {
	return nil
}

func (m *memJournal) AppendAsync(rec journal.Record) (Ticket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	rec.Data = append([]byte(nil), rec.Data...)
	m.recs = append(m.recs, rec)
	return memTicket{m.gate, m.werr}, nil
}

func (m *memJournal) kinds() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := ""
	for _, r := range m.recs {
		s += fmt.Sprintf("%s:%d ", r.Kind, r.Key)
	}
	return s
}

type memTicket struct {
	gate chan struct{}
	err  error
}

func (t memTicket) Done() <-chan struct{} { return t.gate }
func (t memTicket) Wait() error {
	if t.gate != nil {
		<-t.gate
	}
	return t.err
}

func newMemEngine(t *testing.T, m *memJournal) *Engine {
	t.Helper()
	sys := testSystem
	e, err := New(Config{Clock: clock.NewFake(testStart), System: &sys, Journal: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestJournalRecordsPerCommand pins which commands write which records.
func TestJournalRecordsPerCommand(t *testing.T) {
	m := &memJournal{}
	e := newMemEngine(t, m)
	c := newConn(t, e)
	a := c.put(1, 0, 10, "a")                                              // full
	id, _ := c.reserveNow()                                                // nothing
	c.want(wire.Command{Verb: wire.Touch, ID: id}, wire.Touched)           // nothing
	c.want(wire.Command{Verb: wire.Release, ID: a, Pri: 2}, wire.Released) // update
	c.reserveNow()                                                         // nothing
	c.want(wire.Command{Verb: wire.Bury, ID: a, Pri: 3}, wire.Buried)      // update
	c.want(wire.Command{Verb: wire.Kick, Bound: 5}, wire.KickedCount)      // update
	c.want(wire.Command{Verb: wire.PauseTube, Tube: []byte("default"), Delay: 1}, wire.Paused)
	c.want(wire.Command{Verb: wire.ReserveJob, ID: a}, wire.Reserved) // nothing: it was ready
	c.want(wire.Command{Verb: wire.Bury, ID: a, Pri: 3}, wire.Buried) // update
	c.want(wire.Command{Verb: wire.ReserveJob, ID: a}, wire.Reserved) // update: it was buried
	c.want(wire.Command{Verb: wire.Delete, ID: a}, wire.Deleted)      // delete
	c.want(wire.Command{Verb: wire.Delete, ID: a}, wire.NotFound)     // nothing
	want := "full:0 full:1 update:1 update:1 update:1 update:1 update:1 delete:1 "
	if got := m.kinds(); got != want {
		t.Errorf("records\n got %s\nwant %s", got, want)
	}
}

// TestJournalFailureAnswersInternalError: a failed append or write gets
// INTERNAL_ERROR, and a failed put's job is not kept.
func TestJournalFailureAnswersInternalError(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(m *memJournal)
	}{
		{"append", func(m *memJournal) { m.fail = errors.New("disk gone") }},
		{"write", func(m *memJournal) { m.werr = errors.New("EIO") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &memJournal{}
			e := newMemEngine(t, m)
			c := newConn(t, e)
			kept := c.put(1, 0, 10, "kept")
			tc.set(m)
			c.want(wire.Command{Verb: wire.Put, TTR: 1, Body: []byte("lost")}, wire.InternalError)
			if r := c.id(wire.Peek, kept+1); r.Kind != wire.NotFound {
				t.Errorf("failed put's job is visible: %s", show(r))
			}
			if got := c.stat("current-jobs-ready"); got != "1" {
				t.Errorf("current-jobs-ready %s, want 1", got)
			}
			if got := c.stat("total-jobs"); got != "1" {
				t.Errorf("total-jobs %s, want 1", got)
			}
			c.want(wire.Command{Verb: wire.Delete, ID: kept}, wire.InternalError)
			c.want(wire.Command{Verb: wire.Kick, Bound: 1}, wire.KickedCount) // nothing to kick: no record
		})
	}
}

// TestJournalPutInvisibleUntilDurable: while a put's record is not
// durable, no other session can see or reserve its job.
func TestJournalPutInvisibleUntilDurable(t *testing.T) {
	m := &memJournal{}
	e := newMemEngine(t, m)
	m.mu.Lock()
	m.gate = make(chan struct{}) // hold every record from now on
	gate := m.gate
	m.mu.Unlock()
	producer := newConn(t, e)
	consumer := newConn(t, e)
	consumer.startReserve()
	done := make(chan wire.Reply)
	go func() {
		var r wire.Reply
		producer.s.Exec(&wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("x")}, &r)
		done <- r
	}()
	for m.kinds() != "full:0 full:1 " {
		time.Sleep(time.Millisecond)
	}
	other := newConn(t, e)
	for _, cmd := range []wire.Command{{Verb: wire.Peek, ID: 1}, {Verb: wire.StatsJob, ID: 1},
		{Verb: wire.Delete, ID: 1}, {Verb: wire.ReserveJob, ID: 1}, {Verb: wire.KickJob, ID: 1}, {Verb: wire.PeekReady}} {
		if r := other.do(cmd); r.Kind != wire.NotFound {
			t.Errorf("%s of a pending job: %s", verbName(cmd.Verb), show(r))
		}
	}
	consumer.pending()
	close(gate)
	if r := <-done; r.Kind != wire.Inserted || r.ID != 1 {
		t.Fatalf("put: %s", show(r))
	}
	if r := consumer.mustResult(wire.Reserved); r.ID != 1 {
		t.Fatalf("reserved %d", r.ID)
	}
}
