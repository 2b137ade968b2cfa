package tracing_test

import (
	"context"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobgate/jobgate/tracing"
)

// The calls a proxy makes for one Gearman job on an upstream server, whose
// creation context lives in a Table between the client's and the worker's
// connections.
func Example() {
	rec := tracetest.NewSpanRecorder()
	tr := tracing.NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), tracing.Gearman, tracing.Config{})
	jobs := tracing.NewTable[string](100_000)
	ctx := context.Background()

	// Client: SUBMIT_JOB_BG, then JOB_CREATED from the upstream.
	s := tr.StartSend(ctx, tracing.Message{Operation: "SUBMIT_JOB_BG", Destination: "resize", BodySize: 12})
	s.Created("H:gm1:1")
	jobs.Put("H:gm1:1", tracing.Entry{Creation: s.Creation(), Enqueued: time.Now()})

	// Worker: JOB_ASSIGN.
	e, _ := jobs.Get("H:gm1:1")
	m := tracing.Message{Operation: "JOB_ASSIGN", Destination: "resize", ID: "H:gm1:1",
		BodySize: 12, Enqueued: e.Enqueued, Attempt: e.Attempts + 1}
	tr.Receive(ctx, e.Creation, m)
	_, p := tr.StartProcess(ctx, e.Creation, m)
	jobs.Update("H:gm1:1", func(e *tracing.Entry) { e.Attempts++; e.Process = p })

	// Worker: WORK_STATUS, then WORK_COMPLETE.
	if e, ok := jobs.Get("H:gm1:1"); ok {
		e.Process.Status("1", "2")
	}
	if e, ok := jobs.Delete("H:gm1:1"); ok {
		e.Process.Complete()
	}

	for _, span := range rec.Ended() {
		fmt.Println(span.SpanKind(), span.Name(), len(span.Events()), "events")
	}
	// Output:
	// producer send resize 0 events
	// client receive resize 0 events
	// consumer process resize 1 events
}
