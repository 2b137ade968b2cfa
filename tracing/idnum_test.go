package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// TestNumericMessageID: an id given as a prefix and a number
// (Send.CreatedNum, Message.IDNum) is exported as the same
// messaging.message.id the string would give, on the lean path (formatted
// by the encoder) and on the SDK path; number 0 records no id, and an id
// set through the span API afterwards replaces the numeric one.
func TestNumericMessageID(t *testing.T) {
	for _, path := range []string{"lean", "sdk"} {
		t.Run(path, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			var tr *Tracer
			if path == "lean" {
				tr = NewSyncTracer(Gearman, Config{}, rec)
			} else {
				tr = NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), Gearman, Config{})
			}
			ctx := context.Background()
			send := tr.StartSend(ctx, Message{Operation: "SUBMIT_JOB", Destination: "f"})
			send.CreatedNum("H:host:", 18446744073709551615)
			tr.StartSend(ctx, Message{Operation: "put", Destination: "t"}).CreatedNum("", 0)
			p := tr.Deliver(send.Creation(), Message{Operation: "reserve", Destination: "t", IDNum: 7})
			p.Complete()
			p = tr.ProcessOnly(send.Creation(), Message{Operation: "JOB_ASSIGN", Destination: "f", IDPrefix: "H:x:", IDNum: 12})
			p.Span().SetAttributes(semconv.MessagingMessageID("replaced"))
			p.Complete()

			want := []any{"H:host:18446744073709551615", nil, "7", "7", "replaced"}
			got := rec.Ended()
			if len(got) != len(want) {
				t.Fatalf("%d spans, want %d", len(got), len(want))
			}
			for i, s := range got {
				id, ok := attrs(s.Attributes())[string(semconv.MessagingMessageIDKey)]
				if want[i] == nil && ok || want[i] != nil && id != want[i] {
					t.Errorf("span %d (%s): messaging.message.id %v (set %v), want %v", i, s.Name(), id, ok, want[i])
				}
			}
		})
	}
}
