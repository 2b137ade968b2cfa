package gearman

import (
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

// clockHook is a TraceHook with a clock of its own.
type clockHook struct {
	returns
	now int64
}

func (h *clockHook) TraceNow() int64 { return h.now }

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
