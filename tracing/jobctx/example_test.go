package jobctx_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/tracing/jobctx"
)

// A worker strips the envelope and continues the trace from the context.
func ExampleExtract() {
	job := []byte("traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n{\"w\":800}")

	ctx, body := jobctx.Extract(context.Background(), job)
	// ctx now parents the worker's spans: tracer.Start(ctx, "resize").
	fmt.Println(string(body))
	fmt.Println(trace.SpanContextFromContext(ctx).TraceID())
	// Output:
	// {"w":800}
	// 4bf92f3577b34da6a3ce929d0e0e4736
}
