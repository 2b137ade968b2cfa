package gearman

import (
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/journal"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// openJournaled starts an engine on the journal in dir with the fake
// clock clk. crash stops it without closing its sessions, as a kill
// would, and closes the journal.
func openJournaled(t *testing.T, dir string, clk *clock.Fake) (h *harness, crash func(), fj *FileJournal) {
	t.Helper()
	fj, _, err := OpenJournal(dir, journal.Options{Sync: journal.Always, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fj.Close() }) // after the harness's Stop
	h = newHarness(t, Config{Clock: clk, Journal: fj})
	return h, func() { h.e.Stop(); fj.Close() }, fj
}

// adminAwait runs an admin line whose reply may wait for the journal.
func (c *conn) adminAwait(line string) string {
	c.h.t.Helper()
	if err := c.s.HandleText([]byte(line)); err != nil {
		c.h.t.Fatal(err)
	}
	return c.await(1)[0]
}

func TestJournalRestoresLiveBackgroundJobs(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(epoch0)
	h, crash, _ := openJournaled(t, dir, clk)
	c := h.open()
	later := strconv.FormatInt(epoch0.Add(time.Hour).Unix(), 10)
	normal := c.submit(codec.SubmitJobBg, "f", "u1", "d1")
	high := c.submit(codec.SubmitJobHighBg, "f", "u2", "d2")
	low := c.submit(codec.SubmitJobLowBg, "g", "", "d3")
	epoch := c.submit(codec.SubmitJobEpoch, "f", "ue", later, "de")
	sched := c.submit(codec.SubmitJobSched, "f", "", "2", "10", "", "", "", "ds") // 10:02, in 90 s
	reduce := c.submit(codec.SubmitReduceJobBackground, "m", "ur", "red", "agg", "dr")
	dash := c.submit(codec.SubmitJobBg, "f", "-", "dd")
	done := c.submit(codec.SubmitJobBg, "h", "", "done")
	cancelled := c.submit(codec.SubmitJobBg, "h", "", "cancelled")
	running := c.submit(codec.SubmitJobBg, "r", "ur2", "running")
	fg := c.submit(codec.SubmitJob, "h", "", "fg") // foreground: not journaled
	if fg != "H:t:11" {
		t.Fatalf("foreground handle %s", fg)
	}

	w := h.open()
	w.send(codec.CanDo, "h")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + done + " h done")
	w.send(codec.WorkComplete, done, "")
	w.send(codec.EchoReq, "x") // answered once the removal is durable
	w.await(1)
	adm := h.open()
	if got := adm.adminAwait("cancel job " + cancelled); got != "TEXT OK\r\n" {
		t.Fatalf("cancel: %q", got)
	}
	r := h.open()
	r.send(codec.CanDo, "r")
	r.send(codec.GrabJob)
	r.expect("JOB_ASSIGN " + running + " r running")
	crash()

	h2, _, fj2 := openJournaled(t, dir, clk)
	if n := fj2.Restored(); n != 8 {
		t.Fatalf("Restored() = %d, want 8", n)
	}
	adm2 := h2.open()
	want := ""
	for _, hd := range []string{normal, high, low, epoch, sched, reduce, dash, running} {
		want += hd + "\t0\t0\t1\n"
	}
	if got := adm2.admin("show jobs"); got != want+".\n" {
		t.Fatalf("show jobs after restart:\n%s\nwant:\n%s", got, want)
	}
	// Coalescing keys are back, handles continue after the highest.
	c2 := h2.open()
	if got := c2.submit(codec.SubmitJobBg, "f", "u1", "other"); got != normal {
		t.Fatalf("unique u1 coalesced onto %s, want %s", got, normal)
	}
	if got := c2.submit(codec.SubmitJobBg, "f", "-", "dd"); got != dash {
		t.Fatalf("unique - coalesced onto %s, want %s", got, dash)
	}
	fresh := c2.submit(codec.SubmitJobBg, "n", "", "new")
	if fresh != "H:t:11" {
		t.Fatalf("new handle after restart %s, want H:t:11", fresh)
	}
	// Every field is back; the running job is queued again; priorities
	// and queue order hold.
	w2 := h2.open()
	for _, fn := range []string{"f", "g", "m", "r"} {
		w2.send(codec.CanDo, fn)
	}
	for _, want := range []string{
		"JOB_ASSIGN_UNIQ " + high + " f u2 d2",
		"JOB_ASSIGN_UNIQ " + normal + " f u1 d1",
		"JOB_ASSIGN_ALL " + reduce + " m ur red dr",
		"JOB_ASSIGN_UNIQ " + dash + " f - dd",
		"JOB_ASSIGN_UNIQ " + running + " r ur2 running",
		"JOB_ASSIGN_UNIQ " + low + " g  d3",
		"NO_JOB",
	} {
		w2.send(codec.GrabJobAll)
		w2.expect(want)
	}
	// The scheduled and epoch jobs wait for their time.
	w2.send(codec.PreSleep)
	clk.Advance(89 * time.Second)
	w2.expect()
	clk.Advance(time.Second)
	w2.expect("NOOP")
	w2.send(codec.GrabJob)
	w2.expect("JOB_ASSIGN " + sched + " f ds")
	clk.Advance(time.Hour)
	w2.send(codec.GrabJobUniq)
	w2.expect("JOB_ASSIGN_UNIQ " + epoch + " f ue de")
}

func TestJournalHandleCounterSurvivesCompaction(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(epoch0)
	// runAll submits and completes n jobs, expecting handles from first.
	runAll := func(h *harness, first, n int) {
		c, w := h.open(), h.open()
		w.send(codec.CanDo, "f")
		for i := 0; i < n; i++ {
			hd := c.submit(codec.SubmitJobBg, "f", "", "x")
			if want := "H:t:" + strconv.Itoa(first+i); hd != want {
				t.Fatalf("handle %s, want %s", hd, want)
			}
			w.send(codec.GrabJob)
			w.expect("JOB_ASSIGN " + hd + " f x")
			w.send(codec.WorkComplete, hd, "")
		}
		w.send(codec.EchoReq, "sync")
		w.await(1)
	}
	h, crash, _ := openJournaled(t, dir, clk)
	runAll(h, 1, 3)
	crash()
	// The deleted jobs' records still say how far the counter went.
	h, crash, fj := openJournaled(t, dir, clk)
	runAll(h, 4, 2)
	if err := fj.Journal().Compact(); err != nil {
		t.Fatal(err)
	}
	crash()
	// Now only the counter record says it.
	h, _, _ = openJournaled(t, dir, clk)
	if got := h.open().admin("show jobs"); got != ".\n" {
		t.Fatalf("completed jobs came back: %q", got)
	}
	runAll(h, 6, 1)
}

// fakeJournal completes its tickets when the test says so.
type fakeJournal struct {
	mu   sync.Mutex
	recs []journal.Record
	cur  *fakeTicket
	err  error // returned by AppendAsync
}

type fakeTicket struct {
	done chan struct{}
	err  error
}

func (t *fakeTicket) Done() <-chan struct{} { return t.done }
func (t *fakeTicket) Wait() error           { <-t.done; return t.err }

func (fj *fakeJournal) Attach(func(uint64, []byte) error, func(uint64, func([]byte))) error {
	return nil
}

func (fj *fakeJournal) AppendAsync(r journal.Record) (Ticket, error) {
	fj.mu.Lock()
	defer fj.mu.Unlock()
	if fj.err != nil {
		return nil, fj.err
	}
	r.Data = append([]byte(nil), r.Data...)
	fj.recs = append(fj.recs, r)
	if r.Key == counterKey {
		done := make(chan struct{})
		close(done)
		return &fakeTicket{done: done}, nil
	}
	if fj.cur == nil {
		fj.cur = &fakeTicket{done: make(chan struct{})}
	}
	return fj.cur, nil
}

// complete finishes the open batch with err.
func (fj *fakeJournal) complete(err error) {
	fj.mu.Lock()
	t := fj.cur
	fj.cur = nil
	fj.mu.Unlock()
	t.err = err
	close(t.done)
}

func (fj *fakeJournal) kinds() (s string) {
	fj.mu.Lock()
	defer fj.mu.Unlock()
	for _, r := range fj.recs {
		s += r.Kind.String() + strconv.FormatUint(r.Key, 10) + " "
	}
	return s
}

func TestJournalRepliesKeepOrder(t *testing.T) {
	fj := &fakeJournal{}
	h := newHarness(t, Config{Journal: fj})
	c := h.open()
	w := h.open()
	w.send(codec.CanDo, "f")
	c.send(codec.SubmitJobBg, "f", "u", "d")
	c.send(codec.EchoReq, "x")
	c.send(codec.GetStatus, "H:t:1")
	c.send(codec.SubmitJob, "f", "u", "") // foreground, coalesces onto the pending job
	c.expect()
	// Until the record is durable the job is invisible to workers.
	w.send(codec.GrabJob)
	w.expect("NO_JOB")
	fj.complete(nil)
	got := c.await(4)
	want := []string{"JOB_CREATED H:t:1", "ECHO_RES x", "STATUS_RES H:t:1 1 0 0 0", "JOB_CREATED H:t:1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	// A worker's next reply after WORK_COMPLETE proves the removal durable;
	// the client's WORK_COMPLETE is not held (its session waits for nothing).
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN H:t:1 f d")
	w.send(codec.WorkComplete, "H:t:1", "r")
	c.expect("WORK_COMPLETE H:t:1 r")
	w.send(codec.EchoReq, "y")
	w.expect()
	fj.complete(nil)
	w.await(1)
	if k := fj.kinds(); k != "full0 full1 delete1 " {
		t.Fatalf("records %q", k)
	}
}

func TestJournalWriteFailure(t *testing.T) {
	fj := &fakeJournal{}
	h := newHarness(t, Config{Journal: fj})
	c := h.open()
	fg := h.open()
	c.send(codec.SubmitJobBg, "f", "u", "d")
	c.send(codec.EchoReq, "x")
	fg.send(codec.SubmitJob, "f", "u", "d")
	fj.complete(errors.New("disk on fire"))
	got := c.await(2)
	if got[0] != "ERROR QUEUE_ERROR GEARMAND_QUEUE_ERROR" || got[1] != "ECHO_RES x" {
		t.Fatalf("got %q", got)
	}
	if got := fg.await(1); got[0] != "ERROR QUEUE_ERROR GEARMAND_QUEUE_ERROR" {
		t.Fatalf("coalesced foreground submit: %q", got)
	}
	if got := h.open().admin("status"); got != "f\t0\t0\t0\n.\n" {
		t.Fatalf("status after failure: %q", got)
	}
	// A journal that refuses appends fails the submit at once.
	fj.mu.Lock()
	fj.err = journal.ErrFailed
	fj.mu.Unlock()
	c.send(codec.SubmitJobHighBg, "f", "", "d")
	c.expect("ERROR QUEUE_ERROR GEARMAND_QUEUE_ERROR")
	c.send(codec.SubmitJob, "f", "", "foreground jobs are not journaled")
	c.expect("JOB_CREATED H:t:3")
}

// TestJournalAutoCompaction churns through jobs with tiny segments, so
// compaction runs (calling the engine's snapshot) while the engine works,
// then restarts: exactly the live jobs are back.
func TestJournalAutoCompaction(t *testing.T) {
	dir := t.TempDir()
	open := func() (*harness, *FileJournal) {
		fj, _, err := OpenJournal(dir, journal.Options{Sync: journal.Never, SegmentSize: journal.MinSegmentSize, Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fj.Close() })
		return newHarness(t, Config{Journal: fj}), fj
	}
	h, fj := open()
	c, w := h.open(), h.open()
	w.send(codec.CanDo, "churn")
	want := ""
	for i := 0; i < 1500; i++ {
		if i%100 == 0 {
			hd := c.submit(codec.SubmitJobLowBg, "keep", "k"+strconv.Itoa(i), "kept")
			want += "JOB_ASSIGN_UNIQ " + hd + " keep k" + strconv.Itoa(i) + " kept\n"
		}
		hd := c.submit(codec.SubmitJobBg, "churn", "", "some data to fill the segments")
		w.send(codec.GrabJob)
		w.await(1)
		w.send(codec.WorkComplete, hd, "")
	}
	w.send(codec.EchoReq, "sync")
	w.await(1)
	if st := fj.Journal().Stats(); st.Compactions == 0 {
		t.Fatalf("no compaction ran: %+v", st)
	}
	h.e.Stop()
	fj.Close()

	h2, _ := open()
	w2 := h2.open()
	w2.send(codec.CanDo, "keep")
	w2.send(codec.CanDo, "churn")
	got := ""
	for {
		w2.send(codec.GrabJobUniq)
		r := w2.await(1)[0]
		if r == "NO_JOB" {
			break
		}
		got += r + "\n"
	}
	if got != want {
		t.Fatalf("after compaction and restart got\n%s\nwant\n%s", got, want)
	}
}

// FuzzDecodeJobRecord checks that no record, however damaged, panics the
// decoder, and that every record the encoder writes decodes to its fields.
func FuzzDecodeJobRecord(f *testing.F) {
	e, err := New(Config{HandlePrefix: "H:t", Clock: clock.NewFake(epoch0)})
	if err != nil {
		f.Fatal(err)
	}
	red := "reducer"
	j := &job{fn: e.function([]byte("fn")), buf: []byte("uniqdata"), ulen: 4, prio: prioLow, ext: &jobExt{reducer: &red}}
	f.Add(appendJobRecord(nil, j, 12345))
	j.ext = nil
	f.Add(appendJobRecord(nil, j, 0))
	f.Add(appendJobRecordTraced(nil, j, 7, &Creation{0, 1, 2, 3, 25: 1}))
	f.Add([]byte{recordVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeJobRecord(b)
		if err != nil {
			return
		}
		j := &job{fn: &function{name: string(r.fn)}, buf: append(append([]byte(nil), r.unique...), r.data...),
			ulen: uint8(len(r.unique)), prio: r.prio}
		if r.hasReducer {
			s := string(r.redc)
			j.ext = &jobExt{reducer: &s}
		}
		again := appendJobRecord(nil, j, r.at)
		if r.creation != (Creation{}) {
			again = appendJobRecordTraced(nil, j, r.at, &r.creation)
		}
		r2, err := decodeJobRecord(again)
		if err != nil || r2.creation != r.creation || string(r2.fn) != string(r.fn) || string(r2.unique) != string(r.unique) ||
			string(r2.data) != string(r.data) || r2.at != r.at || r2.prio != r.prio ||
			r2.hasReducer != r.hasReducer || string(r2.redc) != string(r.redc) {
			t.Fatalf("round trip of %q: %+v then %+v (%v)", b, r, r2, err)
		}
	})
}

// TestJournalBackgroundSubmitOntoForegroundJob: a background submit that
// coalesces onto a foreground job makes it durable before JOB_CREATED, and
// the job no longer depends on its foreground client.
func TestJournalBackgroundSubmitOntoForegroundJob(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(epoch0)
	h, crash, _ := openJournaled(t, dir, clk)
	fg := h.open()
	hd := fg.submit(codec.SubmitJob, "f", "u", "d")
	bg := h.open()
	if got := bg.submit(codec.SubmitJobBg, "f", "u", "other"); got != hd {
		t.Fatalf("coalesced onto %s, want %s", got, hd)
	}
	fg.close() // the job stays: a background submitter wants it
	crash()
	h2, _, _ := openJournaled(t, dir, clk)
	w := h2.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJobUniq)
	w.expect("JOB_ASSIGN_UNIQ " + hd + " f u d")
}
