package gearman

import (
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// TestLastJobTrace: a grab of a traced job gives the proxy the job's
// trace with LastJobTrace, the same as JobTrace; a grab of an untraced
// job, a miss and any other request give none.
func TestLastJobTrace(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	c.s.SetCreation(testCreation(7))
	traced := c.submit(codec.SubmitJobBg, "f", "u7", "traced")
	c.submit(codec.SubmitJobBg, "f", "", "plain")
	id, _ := h.e.JobID([]byte(traced))
	want, _ := h.e.JobTrace(id)
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJobUniq)
	w.rec.take()
	if jt, ok := w.s.LastJobTrace(); !ok || jt != want || w.s.LastJob() != id {
		t.Fatalf("LastJobTrace %+v %v, want %+v", jt, ok, want)
	}
	w.send(codec.GrabJob)
	w.rec.take()
	if _, ok := w.s.LastJobTrace(); ok || w.s.LastJob() == 0 {
		t.Fatal("untraced grab gave a trace")
	}
	w.send(codec.GrabJob) // nothing left
	w.rec.take()
	if _, ok := w.s.LastJobTrace(); ok {
		t.Fatal("a miss gave a trace")
	}
}
