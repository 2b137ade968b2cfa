package gearman

import (
	"strconv"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
)

// steppingClock is a fake clock whose wall time can step back, as a
// real one can (clock.Fake never goes back).
type steppingClock struct {
	*clock.Fake
	back time.Duration
}

func (c *steppingClock) Now() time.Time { return c.Fake.Now().Add(-c.back) }

// TestTraceReadyAfterClockStepsBack: a traced job's ready time is a
// reading of the clock, not the enqueue sequence. With an observer the
// sequence never goes back, so after the wall clock stepped back an hour
// it stayed an hour ahead of every span, and each job's queue wait
// (receive time minus ready time) came out negative, recorded as 0.
func TestTraceReadyAfterClockStepsBack(t *testing.T) {
	clk := &steppingClock{Fake: clock.NewFake(epoch0)}
	e, err := New(Config{Clock: clk, HandlePrefix: "H:t", PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	h := &harness{t: t, e: e, clk: clk.Fake}
	var w waits
	h.e.SetObserver(&w)
	c := h.open()
	c.s.SetCreation(testCreation(4))
	c.submit(codec.SubmitJobBg, "f", "", "before")
	clk.back = time.Hour // the wall clock steps back an hour
	c.s.SetCreation(testCreation(5))
	id, _ := h.e.JobID([]byte(c.submit(codec.SubmitJobBg, "f", "", "after")))
	jt, ok := h.e.JobTrace(id)
	if want := epoch0.Add(-time.Hour); !ok || !jt.Ready.Equal(want) {
		t.Fatalf("Ready %v, want %v (%v)", jt.Ready, want, ok)
	}
}

// clockHook is a TraceHook with a clock of its own, which counts its
// readings.
type clockHook struct {
	returns
	now      int64
	readings int
}

func (h *clockHook) TraceNow() int64 { h.readings++; return h.now }

// TestTraceReadyOnTraceClock: a hook that is a TraceClock gives traced
// jobs their ready times, on submit and on a requeue, whatever the
// engine's clock says.
func TestTraceReadyOnTraceClock(t *testing.T) {
	h := newHarness(t, Config{})
	hook := &clockHook{now: 12345}
	h.e.SetTraceHook(hook)
	c := h.open()
	c.s.SetCreation(testCreation(6))
	id, _ := h.e.JobID([]byte(c.submit(codec.SubmitJobBg, "f", "", "x")))
	if jt, ok := h.e.JobTrace(id); !ok || jt.Ready.UnixNano() != 12345 {
		t.Fatalf("Ready %v (%v), want 12345 ns", jt.Ready.UnixNano(), ok)
	}
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.rec.take()
	hook.now = 67890
	w.close() // the job goes back to its queue
	if jt, ok := h.e.JobTrace(id); !ok || jt.Ready.UnixNano() != 67890 || jt.Attempt != 2 {
		t.Fatalf("after requeue: Ready %v, attempt %d (%v), want 67890 ns, 2", jt.Ready.UnixNano(), jt.Attempt, ok)
	}
	if len(hook.returns) != 1 || hook.returns[0] != "worker_lost" {
		t.Fatalf("returns %v", hook.returns)
	}
}

// TestTraceReadyFromSubmit: a submit given its time on the trace clock
// (SetCreationAt), as the proxy's are, is ready at that time without a
// reading of the hook's clock. The clock is still read for a submit
// without its time, for an epoch job when its time comes, for a requeue
// and for a background job that waits for its journal record; and the
// time is not kept for the session's next submit.
func TestTraceReadyFromSubmit(t *testing.T) {
	h := newHarness(t, Config{})
	hook := &clockHook{now: 5000}
	h.e.SetTraceHook(hook)
	c := h.open()
	const at = 4000
	c.s.SetCreationAt(testCreation(1), at)
	bg, _ := h.e.JobID([]byte(c.submit(codec.SubmitJobBg, "f", "", "bg")))
	c.s.SetCreationAt(testCreation(2), at)
	later := strconv.FormatInt(epoch0.Add(10*time.Second).Unix(), 10)
	epoch, _ := h.e.JobID([]byte(c.submit(codec.SubmitJobEpoch, "f", "", later, "epoch")))
	if hook.readings != 0 {
		t.Fatalf("%d readings of the trace clock, want 0", hook.readings)
	}
	if jt, ok := h.e.JobTrace(bg); !ok || jt.Ready.UnixNano() != at {
		t.Fatalf("submit: ready %d (%v), want %d", jt.Ready.UnixNano(), ok, at)
	}
	hook.now = 6000
	h.clk.Advance(10 * time.Second) // the epoch job's time: read then
	if jt, ok := h.e.JobTrace(epoch); !ok || jt.Ready.UnixNano() != 6000 || hook.readings != 1 {
		t.Fatalf("epoch job: ready %d (%v), %d readings, want 6000 and 1", jt.Ready.UnixNano(), ok, hook.readings)
	}
	c.s.SetCreation(testCreation(3))
	plain, _ := h.e.JobID([]byte(c.submit(codec.SubmitJobBg, "f", "", "plain")))
	if jt, ok := h.e.JobTrace(plain); !ok || jt.Ready.UnixNano() != 6000 || hook.readings != 2 {
		t.Fatalf("submit without its time: ready %d (%v), %d readings, want 6000 and 2", jt.Ready.UnixNano(), ok, hook.readings)
	}
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.rec.take()
	hook.now = 7000
	w.close() // the job it held goes back to its queue: read
	var requeued uint64
	for _, id := range []uint64{bg, epoch, plain} {
		if jt, ok := h.e.JobTrace(id); ok && jt.Attempt == 2 {
			requeued = id
			if jt.Ready.UnixNano() != 7000 {
				t.Fatalf("requeued job %d: ready %d, want 7000", id, jt.Ready.UnixNano())
			}
		}
	}
	if requeued == 0 || hook.readings != 3 {
		t.Fatalf("requeue: job %d, %d readings, want one job and 3", requeued, hook.readings)
	}

	dir := t.TempDir()
	jh, _, _ := openJournaled(t, dir, clock.NewFake(epoch0))
	jhook := &clockHook{now: 9000}
	jh.e.SetTraceHook(jhook)
	jc := jh.open()
	jc.s.SetCreationAt(testCreation(4), at)
	journaled, _ := jh.e.JobID([]byte(jc.submit(codec.SubmitJobBg, "f", "", "journaled")))
	if jt, ok := jh.e.JobTrace(journaled); !ok || jt.Ready.UnixNano() != 9000 || jhook.readings != 1 {
		t.Fatalf("journaled submit: ready %d (%v), %d readings, want 9000 and 1", jt.Ready.UnixNano(), ok, jhook.readings)
	}
}
