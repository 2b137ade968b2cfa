package proxy

import (
	"math/rand/v2"
	"testing"
)

// TestReplyQueueOrder: against a plain slice as the model, every mix of
// pushes, pops and removals keeps the queue's order and contents.
func TestReplyQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q replyQueue
	var model []*gwReply
	for step := range 20000 {
		switch op := rng.IntN(10); {
		case op < 5:
			r := &gwReply{}
			q.push(r)
			model = append(model, r)
		case op < 9 && len(model) > 0:
			if got := q.pop(); got != model[0] {
				t.Fatalf("step %d: pop returned reply %p, want %p", step, got, model[0])
			}
			model = model[1:]
		case len(model) > 0:
			i := rng.IntN(len(model))
			if !q.remove(model[i]) {
				t.Fatalf("step %d: remove of a queued reply failed", step)
			}
			model = append(model[:i:i], model[i+1:]...)
		default:
			if q.remove(&gwReply{}) {
				t.Fatalf("step %d: removed a reply that was never queued", step)
			}
		}
		if q.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(model))
		}
		for i, r := range q.all() {
			if r != model[i] {
				t.Fatalf("step %d: reply %d differs", step, i)
			}
		}
		if q.len() > 0 && q.front() != model[0] {
			t.Fatalf("step %d: front differs", step)
		}
	}
}

// TestReplyQueueKeepsItsArray: a pipeline that keeps a steady number of
// requests in flight, taking replies from the front as it adds new ones,
// allocates nothing once the array has grown.
func TestReplyQueueKeepsItsArray(t *testing.T) {
	var q replyQueue
	rs := make([]*gwReply, 16)
	for i := range rs {
		rs[i] = &gwReply{}
		q.push(rs[i])
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		q.pop()
		q.push(rs[i%len(rs)])
		i++
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per pop and push, want 0", allocs)
	}
	for q.len() > 0 {
		q.pop()
	}
	if q.head != 0 || len(q.items) != 0 || cap(q.items) == 0 {
		t.Fatalf("emptied queue: head %d, len %d, cap %d; want the array kept for reuse", q.head, len(q.items), cap(q.items))
	}
}
