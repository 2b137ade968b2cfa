package gearman

import (
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// TestEarlyNoopIsTheWakeup: a sleeping worker whose second PRE_SLEEP is
// answered with NOOP at once is awake; the next job's one wakeup must go
// to a worker still asleep, not to it. Otherwise, once the first worker
// takes another job and leaves, the job waits with a sleeper never woken.
func TestEarlyNoopIsTheWakeup(t *testing.T) {
	h := newHarness(t, Config{})
	a, b := h.open(), h.open()
	for _, w := range []*conn{a, b} {
		w.send(codec.CanDo, "f")
		w.send(codec.PreSleep)
	}
	c := h.open()
	c.submit(codec.SubmitJobBg, "g", "", "for a") // nobody can do g yet
	a.send(codec.CanDo, "g")
	a.send(codec.PreSleep)
	a.expect("NOOP") // a job waits: awake at once
	c.submit(codec.SubmitJobBg, "f", "", "for b")
	b.expect("NOOP")
	a.expect()
}
