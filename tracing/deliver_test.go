package tracing

import (
	"context"
	"reflect"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestDeliverMatchesReceiveAndStartProcess: Deliver and ProcessOnly make
// the spans Receive and StartProcess make (names, kinds, parents, links,
// attributes, events), on the lean path and on the SDK path; Deliver's
// receive ends when its process starts.
func TestDeliverMatchesReceiveAndStartProcess(t *testing.T) {
	m := Message{Operation: "JOB_ASSIGN", Destination: "resize", ID: "H:x:1", BodySize: 3,
		Enqueued: time.Now().Add(-time.Second), Attempt: 2, Start: time.Now().Add(-time.Millisecond)}
	for _, path := range []string{"lean", "sdk"} {
		t.Run(path, func(t *testing.T) {
			record := func(run func(tr *Tracer, c Creation)) []sdktrace.ReadOnlySpan {
				var tr *Tracer
				rec := tracetest.NewSpanRecorder()
				if path == "lean" {
					tr = NewSyncTracer(Gearman, Config{}, rec)
				} else {
					tr = NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), Gearman, Config{})
				}
				send := tr.StartSend(context.Background(), Message{Operation: "SUBMIT_JOB", Destination: "resize"})
				send.Created("H:x:1")
				run(tr, send.Creation())
				return rec.Ended()
			}
			old := record(func(tr *Tracer, c Creation) {
				tr.Receive(context.Background(), c, m)
				_, p := tr.StartProcess(context.Background(), c, m)
				p.Complete()
				_, p = tr.StartProcess(context.Background(), c, m)
				p.Fail("WORK_FAIL")
			})
			var recvEnd, procStart time.Time
			got := record(func(tr *Tracer, c Creation) {
				p := tr.Deliver(c, m)
				p.Complete()
				tr.ProcessOnly(c, m).Fail("WORK_FAIL")
			})
			if len(got) != len(old) || len(got) != 4 {
				t.Fatalf("%d spans, want %d (4)", len(got), len(old))
			}
			for i := range got {
				g, o := got[i], old[i]
				ga, oa := attrs(g.Attributes()), attrs(o.Attributes())
				_, gw := ga[string(AttrQueueWait)]
				_, ow := oa[string(AttrQueueWait)]
				delete(ga, string(AttrQueueWait)) // depends on the clock
				delete(oa, string(AttrQueueWait))
				if g.Name() != o.Name() || g.SpanKind() != o.SpanKind() || g.Status() != o.Status() ||
					!reflect.DeepEqual(ga, oa) || gw != ow || len(g.Links()) != len(o.Links()) ||
					len(g.Events()) != len(o.Events()) ||
					i > 0 && g.Parent().SpanID() != got[0].SpanContext().SpanID() {
					t.Errorf("span %d: got %s %v %v %v, want %s %v %v %v", i, g.Name(), g.Status(), attrs(g.Attributes()), g.Events(),
						o.Name(), o.Status(), attrs(o.Attributes()), o.Events())
				}
			}
			recvEnd, procStart = got[1].EndTime(), got[2].StartTime()
			if path == "lean" && !recvEnd.Equal(procStart) {
				t.Errorf("receive ends %v, process starts %v", recvEnd, procStart)
			}
		})
	}
}

// TestDeliverNil: a nil Tracer's Deliver and ProcessOnly give the zero
// Process.
func TestDeliverNil(t *testing.T) {
	var tr *Tracer
	if tr.Deliver(Creation{}, Message{}).IsOpen() || tr.ProcessOnly(Creation{}, Message{}).IsOpen() {
		t.Fatal("open Process from a nil Tracer")
	}
}
