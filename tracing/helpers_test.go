package tracing

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// otelVars are every variable the package reads; tests blank them all so
// the developer's environment cannot leak in.
var otelVars = []string{
	"OTEL_SDK_DISABLED",
	"OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_INSECURE",
	"OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_SERVICE_NAME",
	"OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_TRACES_SAMPLER",
	"OTEL_TRACES_SAMPLER_ARG",
	"OTEL_BSP_MAX_QUEUE_SIZE",
	"OTEL_BSP_SCHEDULE_DELAY",
	"OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_EXPORTER_OTLP_COMPRESSION",
	"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
}

// clearEnv blanks every OTEL variable for the test (empty counts as unset).
func clearEnv(t testing.TB) {
	t.Helper()
	for _, v := range otelVars {
		t.Setenv(v, "")
	}
}

// recorded returns a Tracer for sys that samples everything and whose job
// spans take the lean path: each is encoded as OTLP and decoded back into
// the in-memory recorder, so the tests check the real encoding.
func recorded(t *testing.T, sys System, cfg Config) (*Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	return NewSyncTracer(sys, cfg, rec), rec
}

// attrs turns attributes into a map of plain Go values for DeepEqual.
func attrs(kvs []attribute.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// wantSpan is what a test expects of one finished span.
type wantSpan struct {
	name   string
	kind   trace.SpanKind
	parent string   // name of the parent span; "" for a root
	links  []string // names of linked spans
	attrs  map[string]any
	// waitAtLeast, when set, is the least jobgate.queue.wait_ms allowed;
	// the attribute must then be present (its exact value depends on the
	// clock, so it is checked apart from attrs).
	waitAtLeast int64
	events      []wantEvent
	status      codes.Code
	statusDesc  string
}

type wantEvent struct {
	name  string
	attrs map[string]any
}

// checkSpans asserts that got is exactly want, in order, with parents and
// links resolved by span name among got. All spans must share one trace.
func checkSpans(t *testing.T, got []sdktrace.ReadOnlySpan, want []wantSpan) {
	t.Helper()
	if len(got) != len(want) {
		var names []string
		for _, s := range got {
			names = append(names, s.Name())
		}
		t.Fatalf("got %d spans %v, want %d", len(got), names, len(want))
	}
	// nameOf finds a span of got by id, so parents and links read as names.
	nameOf := func(id trace.SpanID) string {
		for _, s := range got {
			if s.SpanContext().SpanID() == id {
				return s.Name()
			}
		}
		return "?" + id.String()
	}
	tid := got[0].SpanContext().TraceID()
	for i, w := range want {
		s := got[i]
		where := fmt.Sprintf("span %d %q", i, s.Name())
		if s.Name() != w.name {
			t.Errorf("%s: name %q, want %q", where, s.Name(), w.name)
		}
		if s.SpanContext().TraceID() != tid {
			t.Errorf("%s: trace %s, want the job's trace %s", where, s.SpanContext().TraceID(), tid)
		}
		if s.SpanKind() != w.kind {
			t.Errorf("%s: kind %v, want %v", where, s.SpanKind(), w.kind)
		}
		switch {
		case w.parent == "" && s.Parent().IsValid():
			t.Errorf("%s: parent %s, want a root", where, nameOf(s.Parent().SpanID()))
		case w.parent != "" && nameOf(s.Parent().SpanID()) != w.parent:
			t.Errorf("%s: parent %s, want %s", where, nameOf(s.Parent().SpanID()), w.parent)
		}
		var links []string
		for _, l := range s.Links() {
			links = append(links, nameOf(l.SpanContext.SpanID()))
		}
		if !reflect.DeepEqual(links, w.links) {
			t.Errorf("%s: links %v, want %v", where, links, w.links)
		}
		a := attrs(s.Attributes())
		if w.waitAtLeast > 0 {
			v, ok := a[string(AttrQueueWait)].(int64)
			if !ok || v < w.waitAtLeast || v > w.waitAtLeast+60_000 {
				t.Errorf("%s: %s = %v, want about %d", where, AttrQueueWait, a[string(AttrQueueWait)], w.waitAtLeast)
			}
			delete(a, string(AttrQueueWait))
		}
		if !reflect.DeepEqual(a, w.attrs) {
			t.Errorf("%s: attributes\n got %v\nwant %v", where, sorted(a), sorted(w.attrs))
		}
		var evs []wantEvent
		for _, e := range s.Events() {
			ea := attrs(e.Attributes)
			if len(ea) == 0 {
				ea = nil
			}
			evs = append(evs, wantEvent{e.Name, ea})
		}
		if !reflect.DeepEqual(evs, w.events) {
			t.Errorf("%s: events\n got %v\nwant %v", where, evs, w.events)
		}
		if s.Status().Code != w.status || s.Status().Description != w.statusDesc {
			t.Errorf("%s: status %v %q, want %v %q", where, s.Status().Code, s.Status().Description, w.status, w.statusDesc)
		}
		if s.EndTime().Before(s.StartTime()) {
			t.Errorf("%s: ends before it starts", where)
		}
	}
}

// sorted renders a map in key order, for readable failures.
func sorted(m map[string]any) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(out)
	return out
}

// setMessage sets the attributes of m that the SDK path sets through
// Tracer.attrs, without building them.
func (s *leanSpan) setMessage(opType string, m *Message, body bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.setMessageLocked(opType, m, body)
	}
}
