package proxy_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobgate/jobgate/tracing"
)

// recordedTracer returns a Tracer for sys that samples everything and whose
// job spans take the lean path, encoded as OTLP and decoded back into the
// in-memory recorder.
func recordedTracer(t *testing.T, sys tracing.System, cfg tracing.Config) (*tracing.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	return tracing.NewSyncTracer(sys, cfg, rec), rec
}

// waitSpans polls until rec holds n finished spans (ending can happen on
// another goroutine after the reply the test saw) and returns them; it
// fails the test after a deadline or if there are more.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans := rec.Ended()
		if len(spans) > n {
			t.Fatalf("%d spans, want %d:\n%s", len(spans), n, strings.Join(describeSpans(spans), "\n"))
		}
		if len(spans) == n {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans after 5s, want %d:\n%s", len(spans), n, strings.Join(describeSpans(spans), "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// describeSpans renders each span as one line that a test compares
// exactly: name, kind, parent and links (by span name, "-" for none, and
// "=" when parent and link are the same span), status, sorted attributes
// and events with their attributes. jobgate.queue.wait_ms depends on the
// clock, so only its presence shows ("wait"). Spans are listed in the
// order they ended.
func describeSpans(spans []sdktrace.ReadOnlySpan) []string {
	names := map[[8]byte]string{}
	traces := map[[16]byte]int{}
	for _, s := range spans {
		names[s.SpanContext().SpanID()] = s.Name()
		if _, ok := traces[s.SpanContext().TraceID()]; !ok {
			traces[s.SpanContext().TraceID()] = len(traces) + 1
		}
	}
	var out []string
	for _, s := range spans {
		parent := "-"
		if s.Parent().IsValid() {
			parent = names[s.Parent().SpanID()]
			if parent == "" {
				parent = "?" // not among the spans given
			}
		}
		var links []string
		for _, l := range s.Links() {
			n := names[l.SpanContext.SpanID()]
			if l.SpanContext.SpanID() == s.Parent().SpanID() {
				n = "="
			}
			links = append(links, n)
		}
		var attrs []string
		for _, kv := range s.Attributes() {
			if kv.Key == tracing.AttrQueueWait {
				attrs = append(attrs, "wait")
				continue
			}
			attrs = append(attrs, fmt.Sprintf("%s=%v", kv.Key, kv.Value.AsInterface()))
		}
		sort.Strings(attrs)
		var events []string
		for _, e := range s.Events() {
			ev := e.Name
			var ea []string
			for _, kv := range e.Attributes {
				ea = append(ea, fmt.Sprintf("%s=%v", kv.Key, kv.Value.AsInterface()))
			}
			sort.Strings(ea)
			if len(ea) > 0 {
				ev += "{" + strings.Join(ea, ",") + "}"
			}
			events = append(events, ev)
		}
		line := fmt.Sprintf("T%d %s %s parent=%s links=%v status=%s %s",
			traces[s.SpanContext().TraceID()], s.Name(), s.SpanKind(), parent, links,
			s.Status().Code, strings.Join(attrs, " "))
		if len(events) > 0 {
			line += " events=" + strings.Join(events, ";")
		}
		out = append(out, line)
	}
	return out
}

// checkSpans compares describeSpans(spans) with want, line by line.
func checkSpans(t *testing.T, spans []sdktrace.ReadOnlySpan, want []string) {
	t.Helper()
	got := describeSpans(spans)
	if slices.Equal(got, want) {
		return
	}
	var b strings.Builder
	for i := range max(len(got), len(want)) {
		g, w := "", ""
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		mark := "  "
		if g != w {
			mark = "! "
		}
		fmt.Fprintf(&b, "%sgot  %s\n%swant %s\n", mark, g, mark, w)
	}
	t.Fatalf("spans differ:\n%s", b.String())
}
