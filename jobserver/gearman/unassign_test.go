package gearman

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// heldJob is a job a test worker holds: its handle and workload.
type heldJob struct{ handle, data string }

// grabAll has w grab until NO_JOB and returns what it was assigned, in
// order.
func grabAll(t *testing.T, w *conn) []heldJob {
	t.Helper()
	var got []heldJob
	for {
		w.send(codec.GrabJob)
		r := w.rec.take()
		if len(r) != 1 {
			t.Fatalf("GRAB_JOB: got %q", r)
		}
		if r[0] == "NO_JOB" {
			return got
		}
		f := strings.Fields(r[0])
		if len(f) != 4 || f[0] != "JOB_ASSIGN" {
			t.Fatalf("GRAB_JOB: got %q", r)
		}
		got = append(got, heldJob{f[1], f[3]})
	}
}

// without returns held minus the jobs at the given positions, in order.
func without(held []heldJob, done []int) []heldJob {
	var left []heldJob
	for i, j := range held {
		if !slices.Contains(done, i) {
			left = append(left, j)
		}
	}
	return left
}

// reversed returns a reversed copy of js.
func reversed(js []heldJob) []heldJob {
	r := slices.Clone(js)
	slices.Reverse(r)
	return r
}

// A worker holding many jobs finishes some out of order (the first, the
// last, neighbours, the middle; completed and failed); when it goes, the
// others, and only they, go back to the queue newest first, as gearmand
// requeues them.
func TestWorkerDropAfterOutOfOrderCompletes(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	const n = 40
	for i := range n {
		c.submit(codec.SubmitJobBg, "f", "", fmt.Sprintf("j%02d", i))
	}
	w := h.open()
	w.send(codec.CanDo, "f")
	held := grabAll(t, w)
	if len(held) != n || w.s.Assigned() != n {
		t.Fatalf("grabbed %d, Assigned %d, want %d", len(held), w.s.Assigned(), n)
	}
	done := []int{0, n - 1, 20, 7, 8, 9, 33, 1, n - 2, 15}
	for k, i := range done {
		if k%3 == 2 {
			w.send(codec.WorkFail, held[i].handle)
		} else {
			w.send(codec.WorkComplete, held[i].handle, "ok")
		}
	}
	w.expect() // background jobs: no client to tell, no error
	if a := w.s.Assigned(); a != n-len(done) {
		t.Fatalf("Assigned %d after %d finished, want %d", a, len(done), n-len(done))
	}
	checkInvariants(t, h.e)
	w.close()
	w2 := h.open()
	w2.send(codec.CanDo, "f")
	got := grabAll(t, w2)
	if want := reversed(without(held, done)); !slices.Equal(got, want) {
		t.Fatalf("requeued\n got  %v\n want %v", got, want)
	}
	for _, j := range got {
		w2.send(codec.WorkComplete, j.handle, "ok")
	}
	w2.expect()
	if s := c.admin("status"); s != "f\t0\t0\t1\n.\n" {
		t.Fatalf("status %q", s)
	}
}

// CANT_DO gives up, newest first, the held jobs of that function only,
// after some of both functions finished out of order; the rest go, newest
// first, when the worker closes.
func TestCantDoAfterOutOfOrderCompletes(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	const n = 30
	for i := range n {
		fn := []string{"f", "g"}[i%2]
		c.submit(codec.SubmitJobBg, fn, "", fmt.Sprintf("%s%02d", fn, i))
	}
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.CanDo, "g")
	held := grabAll(t, w) // f and g alternate: each is the oldest in turn
	if len(held) != n || held[0].data != "f00" || held[1].data != "g01" {
		t.Fatalf("grabbed %v", held)
	}
	done := []int{1, 4, 5, 6, 17, 28, 29, 0}
	for _, i := range done {
		w.send(codec.WorkComplete, held[i].handle, "ok")
	}
	left := without(held, done)
	var fLeft, gLeft []heldJob
	for _, j := range left {
		if j.data[0] == 'f' {
			fLeft = append(fLeft, j)
		} else {
			gLeft = append(gLeft, j)
		}
	}
	w.send(codec.CantDo, "f")
	w.expect()
	if a := w.s.Assigned(); a != len(gLeft) {
		t.Fatalf("Assigned %d after CANT_DO f, want the %d g jobs", a, len(gLeft))
	}
	checkInvariants(t, h.e)
	w2 := h.open()
	w2.send(codec.CanDo, "f")
	if got, want := grabAll(t, w2), reversed(fLeft); !slices.Equal(got, want) {
		t.Fatalf("CANT_DO requeued\n got  %v\n want %v", got, want)
	}
	w.close()
	w3 := h.open()
	w3.send(codec.CanDo, "g")
	if got, want := grabAll(t, w3), reversed(gLeft); !slices.Equal(got, want) {
		t.Fatalf("close requeued\n got  %v\n want %v", got, want)
	}
	w2.close()
	w3.close()
}
