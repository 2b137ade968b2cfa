package gearman

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// heldJob is a job a test worker was assigned: its handle and workload.
type heldJob struct{ handle, data string }

// worker is a Gearman worker connection of a scenario, to the engine or
// to a real gearmand (unassign_gearmand_test.go).
type worker interface {
	// send sends a request that gets no reply.
	send(t codec.Type, args ...string)
	// grab sends GRAB_JOB and returns the job assigned, ok false on NO_JOB.
	grab() (j heldJob, ok bool)
	// sync returns once every request sent before was handled.
	sync()
	close()
}

// backend is a job server a scenario runs against.
type backend interface {
	submitBg(fn, data string)
	worker() worker
	// settle waits until no job of fn runs: a closed worker's jobs are
	// back in the queue.
	settle(fn string)
}

// grabAll has w grab until NO_JOB and returns what it was assigned, in
// order.
func grabAll(w worker) []heldJob {
	var got []heldJob
	for {
		j, ok := w.grab()
		if !ok {
			return got
		}
		got = append(got, j)
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

// datas returns the workloads of js, which name the jobs on any server.
func datas(js []heldJob) []string {
	var d []string
	for _, j := range js {
		d = append(d, j.data)
	}
	return d
}

// Out-of-order completions among many held jobs: the first, the last,
// neighbours, the middle; completed and failed.
var outOfOrder = []int{0, 39, 20, 7, 8, 9, 33, 1, 38, 15}

// dropAfterOutOfOrder: a worker holding 40 jobs finishes some out of order;
// when it goes, the others, and only they, go back to the queue newest
// first, which a second worker sees in the order it grabs them.
func dropAfterOutOfOrder(t *testing.T, b backend) {
	const n = 40
	for i := range n {
		b.submitBg("f", fmt.Sprintf("j%02d", i))
	}
	w := b.worker()
	w.send(codec.CanDo, "f")
	held := grabAll(w)
	if len(held) != n {
		t.Fatalf("grabbed %d jobs, want %d", len(held), n)
	}
	for k, i := range outOfOrder {
		if k%3 == 2 {
			w.send(codec.WorkFail, held[i].handle)
		} else {
			w.send(codec.WorkComplete, held[i].handle, "ok")
		}
	}
	w.sync()
	w.close()
	b.settle("f")
	w2 := b.worker()
	defer w2.close()
	w2.send(codec.CanDo, "f")
	got := grabAll(w2)
	if want := reversed(without(held, outOfOrder)); !slices.Equal(datas(got), datas(want)) {
		t.Fatalf("requeued\n got  %v\n want %v", datas(got), datas(want))
	}
	for _, j := range got {
		w2.send(codec.WorkComplete, j.handle, "ok")
	}
	w2.sync()
}

// cantDoAfterOutOfOrder: CANT_DO gives up, newest first, the held jobs of
// that function only, after jobs of both functions finished out of order;
// the rest go, newest first, when the worker closes.
func cantDoAfterOutOfOrder(t *testing.T, b backend) {
	const n = 30
	w := b.worker()
	w.send(codec.CanDo, "f")
	w.send(codec.CanDo, "g")
	var held []heldJob
	for i := range n {
		// One job queued at a time: the grab order is the submit order
		// on any server, and the functions alternate in it.
		fn := []string{"f", "g"}[i%2]
		b.submitBg(fn, fmt.Sprintf("%s%02d", fn, i))
		j, ok := w.grab()
		if !ok {
			t.Fatalf("no job after submitting %s%02d", fn, i)
		}
		held = append(held, j)
	}
	done := []int{1, 4, 5, 6, 17, 28, 29, 0, 14, 15}
	for _, i := range done {
		w.send(codec.WorkComplete, held[i].handle, "ok")
	}
	var fLeft, gLeft []heldJob
	for _, j := range without(held, done) {
		if j.data[0] == 'f' {
			fLeft = append(fLeft, j)
		} else {
			gLeft = append(gLeft, j)
		}
	}
	w.send(codec.CantDo, "f")
	w.sync()
	w2 := b.worker()
	defer w2.close()
	w2.send(codec.CanDo, "f")
	if got, want := grabAll(w2), reversed(fLeft); !slices.Equal(datas(got), datas(want)) {
		t.Fatalf("CANT_DO requeued\n got  %v\n want %v", datas(got), datas(want))
	}
	w.close()
	b.settle("g")
	w3 := b.worker()
	defer w3.close()
	w3.send(codec.CanDo, "g")
	if got, want := grabAll(w3), reversed(gLeft); !slices.Equal(datas(got), datas(want)) {
		t.Fatalf("close requeued\n got  %v\n want %v", datas(got), datas(want))
	}
}

// engineBackend runs a scenario on an engine harness.
type engineBackend struct {
	h      *harness
	client *conn
}

func newEngineBackend(t *testing.T) *engineBackend {
	h := newHarness(t, Config{})
	return &engineBackend{h: h, client: h.open()}
}

func (b *engineBackend) submitBg(fn, data string) { b.client.submit(codec.SubmitJobBg, fn, "", data) }
func (b *engineBackend) worker() worker           { return engineWorker{b.h.open()} }

func (b *engineBackend) settle(fn string) {
	b.h.t.Helper()
	for _, l := range strings.Split(b.client.admin("status"), "\n") {
		if f := strings.Split(l, "\t"); f[0] == fn && (len(f) != 4 || f[2] != "0") {
			b.h.t.Fatalf("status after close: %q", l)
		}
	}
}

// engineWorker is a worker session of the engine; the engine handles a
// request before Handle returns, so sync only checks nothing was said.
type engineWorker struct{ c *conn }

func (w engineWorker) send(t codec.Type, args ...string) { w.c.send(t, args...) }
func (w engineWorker) sync()                             { w.c.expect() }
func (w engineWorker) close()                            { w.c.close() }

func (w engineWorker) grab() (heldJob, bool) {
	w.c.h.t.Helper()
	w.c.send(codec.GrabJob)
	r := w.c.rec.take()
	if len(r) == 1 && r[0] == "NO_JOB" {
		return heldJob{}, false
	}
	if len(r) != 1 {
		w.c.h.t.Fatalf("GRAB_JOB: got %q", r)
	}
	f := strings.Fields(r[0])
	if len(f) != 4 || f[0] != "JOB_ASSIGN" {
		w.c.h.t.Fatalf("GRAB_JOB: got %q", r)
	}
	return heldJob{f[1], f[3]}, true
}

func TestWorkerDropAfterOutOfOrderCompletes(t *testing.T) {
	b := newEngineBackend(t)
	dropAfterOutOfOrder(t, b)
	if s := b.client.admin("status"); s != "f\t0\t0\t0\n.\n" {
		t.Fatalf("status %q", s)
	}
}

func TestCantDoAfterOutOfOrderCompletes(t *testing.T) {
	cantDoAfterOutOfOrder(t, newEngineBackend(t))
}

// Assigned counts the jobs a worker holds as they come and go out of
// order.
func TestAssignedOutOfOrder(t *testing.T) {
	b := newEngineBackend(t)
	for i := range 10 {
		b.submitBg("f", fmt.Sprint(i))
	}
	w := b.h.open()
	w.send(codec.CanDo, "f")
	held := grabAll(engineWorker{w})
	if a := w.s.Assigned(); a != 10 || !w.s.Busy() {
		t.Fatalf("Assigned %d, Busy %v after grabbing 10", a, w.s.Busy())
	}
	for k, i := range []int{5, 0, 9, 4, 6, 1, 8, 2, 7, 3} {
		w.send(codec.WorkComplete, held[i].handle, "ok")
		if a := w.s.Assigned(); a != 9-k {
			t.Fatalf("Assigned %d after %d completes", a, k+1)
		}
		checkInvariants(t, b.h.e)
	}
	if w.s.Busy() {
		t.Fatal("Busy with no job in hand")
	}
	w.close()
}
