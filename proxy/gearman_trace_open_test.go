package proxy

import (
	"context"
	"slices"
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/tracing"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestOpenSpans checks the open-span table against a map: ids that share
// a ring slot (1024 apart) go to the overflow, a job put again after its
// slot was freed is found once, and take empties both.
func TestOpenSpans(t *testing.T) {
	tr := tracing.NewSyncTracer(tracing.Gearman, tracing.Config{}, tracetest.NewSpanRecorder())
	span := func() tracing.Process { return tr.ProcessOnly(tracing.Creation{}, tracing.Message{Destination: "f"}) }
	var o openSpans
	want := map[uint64]tracing.Process{}
	check := func(ids ...uint64) {
		t.Helper()
		for _, id := range ids {
			if got := o.get(id); got != want[id] {
				t.Fatalf("get(%d) = %v, want %v", id, got, want[id])
			}
		}
		if o.len() != len(want) {
			t.Fatalf("len %d, want %d", o.len(), len(want))
		}
	}
	ids := []uint64{1, 1025, 2049, 2, 1023, 1024, 2048}
	for _, id := range ids {
		p := span()
		if old := o.put(id, p); old != (tracing.Process{}) {
			t.Fatalf("put(%d) found %v", id, old)
		}
		want[id] = p
	}
	check(ids...)
	if len(o.more) != 3 { // 1025, 2049 behind 1; 2048 behind 1024
		t.Fatalf("overflow %d, want 3", len(o.more))
	}
	// Freeing 1 leaves 1025 in the overflow; putting it again takes the
	// free slot and must not leave the old entry behind.
	if got := o.take(1); got != want[1] {
		t.Fatal("take(1)")
	}
	delete(want, 1)
	p := span()
	if old := o.put(1025, p); old != want[1025] {
		t.Fatalf("put(1025) again returned %v, want the old span", old)
	}
	want[1025] = p
	check(ids...)
	if o.ring[1].id != 1025 || len(o.more) != 2 {
		t.Fatalf("slot 1 holds %d, overflow %d", o.ring[1].id, len(o.more))
	}
	for _, id := range ids {
		if got := o.take(id); got != want[id] {
			t.Fatalf("take(%d) = %v, want %v", id, got, want[id])
		}
		delete(want, id)
		if got := o.take(id); got != (tracing.Process{}) {
			t.Fatalf("second take(%d) = %v", id, got)
		}
	}
	check(ids...)
}

// TestGearmanTraceReturnedBeforeAssigned: a CAN_DO_TIMEOUT that takes a
// job back between the engine's assignment and the grab's putting of the
// process span (the engine's timer runs apart from the connection) ends
// that span as timed out when it is put, and leaves nothing open.
func TestGearmanTraceReturnedBeforeAssigned(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := tracing.NewSyncTracer(tracing.Gearman, tracing.Config{}, rec)
	gt := &gearmanTrace{tr: tr, handlePrefix: "H:t:"}
	send := tr.StartSend(context.Background(), tracing.Message{Operation: "SUBMIT_JOB", Destination: "f"})
	jt := gearman.JobTrace{Creation: gearman.Creation(send.Creation()), Function: "f", Attempt: 1}
	send.End()

	gt.JobReturned(7, gearman.ReturnTimeout) // the timer wins the race
	gt.assigned(7, jt, codec.GrabJob, tr.Now())
	gt.assigned(8, jt, codec.GrabJob, tr.Now()) // the usual order
	gt.JobReturned(8, gearman.ReturnCantDo)
	if n := gt.open.len(); n != 0 || len(gt.returned) != 0 {
		t.Fatalf("left open: %d spans, %d early returns", n, len(gt.returned))
	}
	var got []string
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindConsumer {
			for _, a := range s.Attributes() {
				if a.Key == "error.type" {
					got = append(got, a.Value.AsString())
				}
			}
		}
	}
	if !slices.Equal(got, []string{"timeout", "cant_do"}) {
		t.Fatalf("process spans' error.type %q, want timeout then cant_do", got)
	}
}

// len returns how many spans are open.
func (o *openSpans) len() int {
	n := len(o.more)
	for i := range o.ring {
		if o.ring[i].id != 0 {
			n++
		}
	}
	return n
}
