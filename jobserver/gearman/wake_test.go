package gearman

import (
	"strconv"
	"testing"
	"time"

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

// TestHugeCanDoTimeoutKeepsTimers: a CAN_DO_TIMEOUT so long that its
// deadline passes the int64 range is no timeout; it must neither requeue
// the job at once nor stop the engine's timer for other jobs (an epoch
// job here).
func TestHugeCanDoTimeoutKeepsTimers(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	hd := c.submit(codec.SubmitJobBg, "f", "", "x")
	w := h.open()
	w.send(codec.CanDoTimeout, "f", "8000000000000")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + hd + " f x")
	e := h.open()
	e.send(codec.CanDo, "e")
	e.send(codec.PreSleep)
	at := epoch0.Add(2 * time.Second).Unix()
	c.submit(codec.SubmitJobEpoch, "e", "", strconv.FormatInt(at, 10), "later")
	h.clk.Advance(2 * time.Second)
	e.expect("NOOP")
	w.send(codec.WorkComplete, hd, "done")
	w.expect()
}

// TestWakeupPassedOnWhenAnotherJobTaken: a worker of two functions, woken
// for a new job of one, takes a more urgent job of the other; the first
// job's wakeup must go on to another sleeping worker of its function, not
// wait for the next submit.
func TestWakeupPassedOnWhenAnotherJobTaken(t *testing.T) {
	h := newHarness(t, Config{})
	both, onlyF := h.open(), h.open()
	both.send(codec.CanDo, "f")
	both.send(codec.CanDo, "g")
	onlyF.send(codec.CanDo, "f")
	for _, w := range []*conn{both, onlyF} {
		w.send(codec.PreSleep)
	}
	c := h.open()
	hf := c.submit(codec.SubmitJobBg, "f", "", "for f")
	// The round robin starts with the first worker registered.
	both.expect("NOOP")
	onlyF.expect()
	hg := c.submit(codec.SubmitJobHighBg, "g", "", "for g")
	onlyF.expect() // g's job: its only worker is already woken
	both.send(codec.GrabJob)
	both.expect("JOB_ASSIGN " + hg + " g for g")
	onlyF.expect("NOOP")
	onlyF.send(codec.GrabJob)
	onlyF.expect("JOB_ASSIGN " + hf + " f for f")
}
