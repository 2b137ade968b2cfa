package gearman

import (
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
)

// TestTraceRestoredReadyOnTraceClock: a traced job restored from the
// journal gets its ready time from the spans' clock when the hook is set,
// not from the engine's clock, which stamped it before the hook and its
// clock were there: here the engine's clock stands a year before the
// spans', and the receive and process spans' queue wait came out a year
// long (or, the other way round, negative, recorded as 0). Without a
// TraceClock the restored job's ready time is unknown.
func TestTraceRestoredReadyOnTraceClock(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(epoch0)
	h, crash, _ := openJournaled(t, dir, clk)
	c := h.open()
	c.s.SetCreation(testCreation(6))
	traced := c.submit(codec.SubmitJobBg, "f", "", "traced")
	crash()

	h2, crash, _ := openJournaled(t, dir, clk)
	id, _ := h2.e.JobID([]byte(traced))
	if jt, ok := h2.e.JobTrace(id); !ok || !jt.Ready.IsZero() {
		t.Fatalf("restored, no hook: %+v %v, want no ready time", jt, ok)
	}
	var plain returns
	h2.e.SetTraceHook(&plain) // no clock: still unknown
	if jt, ok := h2.e.JobTrace(id); !ok || !jt.Ready.IsZero() {
		t.Fatalf("restored, hook without a clock: %+v %v, want no ready time", jt, ok)
	}
	crash()

	h3, _, _ := openJournaled(t, dir, clk)
	spans := epoch0.Add(365 * 24 * time.Hour)
	hook := &clockHook{now: spans.UnixNano()}
	h3.e.SetTraceHook(hook)
	jt, ok := h3.e.JobTrace(id)
	if !ok || jt.Creation != testCreation(6) || !jt.Ready.Equal(spans) {
		t.Fatalf("restored: %+v %v, want the creation and ready at %v", jt, ok, spans)
	}
	hook.now += int64(time.Second)
	w := h3.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + traced + " f traced")
	if jt, ok := w.s.LastJobTrace(); !ok || !jt.Ready.Equal(spans) {
		t.Fatalf("grabbed after restore: %+v %v, want ready at %v", jt, ok, spans)
	}
	hook.now += int64(time.Second)
	w.close() // the worker is lost: the job goes back to its queue
	jt, ok = h3.e.JobTrace(id)
	if want := spans.Add(2 * time.Second); !ok || !jt.Ready.Equal(want) {
		t.Fatalf("requeued: Ready %v, want %v (%v)", jt.Ready, want, ok)
	}
}
