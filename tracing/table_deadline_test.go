package tracing

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// stopCounter is a deadline timer that counts its stops.
type stopCounter struct{ stops int }

func (s *stopCounter) Stop() bool { s.stops++; return true }

// TestTableStopsDeadlines: an entry's deadline timer is stopped when the
// table evicts the entry, when EndOpen ends its span, and by StopDeadline,
// once each.
func TestTableStopsDeadlines(t *testing.T) {
	tb := NewTable[int](1)
	evicted := &stopCounter{}
	tb.Put(1, Entry{Deadline: evicted})
	tb.Put(2, Entry{}) // evicts 1
	if evicted.stops != 1 {
		t.Errorf("evicted entry's timer stopped %d times, want 1", evicted.stops)
	}
	ended := &stopCounter{}
	tb.Update(2, func(e *Entry) { e.Deadline = ended })
	tb.EndOpen("shutdown")
	tb.EndOpen("shutdown")
	if ended.stops != 1 {
		t.Errorf("EndOpen stopped the timer %d times, want 1", ended.stops)
	}
	own := &stopCounter{}
	e := Entry{Deadline: own}
	e.StopDeadline()
	e.StopDeadline()
	if own.stops != 1 || e.Deadline != nil {
		t.Errorf("StopDeadline: %d stops, deadline %v", own.stops, e.Deadline)
	}
}

// TestTablePutKeepsOpenProcess: a Put over an entry whose worker holds the
// job (a coalesced Gearman submit gets the running job's handle) keeps the
// open span, its deadline, attempts and creation, so the worker's outcome
// still ends it; a Put over an entry with no open span replaces it and
// stops its deadline; a Put bringing its own span ends the replaced one as
// evicted rather than losing it.
func TestTablePutKeepsOpenProcess(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	tb := NewTable[string](4)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	first := CreationOf(sc)
	_, p := tr.StartProcess(context.Background(), first, Message{Destination: "f"})
	held := &stopCounter{}
	tb.Put("H:1", Entry{Creation: first, Attempts: 1, Process: p, Deadline: held})
	tb.Put("H:1", Entry{Creation: Creation{}, Enqueued: time.Now()})
	e, ok := tb.Get("H:1")
	if !ok || e.Process != p || e.Deadline != held || e.Attempts != 1 || e.Creation != first {
		t.Fatalf("after a coalesced Put: %+v", e)
	}
	if held.stops != 0 || len(rec.Ended()) != 0 {
		t.Fatalf("the held job's timer stopped %d times, %d spans ended", held.stops, len(rec.Ended()))
	}

	queued := &stopCounter{}
	tb.Put("H:2", Entry{Attempts: 1, Deadline: queued})
	tb.Put("H:2", Entry{Attempts: 0})
	if e, _ := tb.Get("H:2"); e.Attempts != 0 || e.Deadline != nil || queued.stops != 1 {
		t.Fatalf("after replacing an entry with no open span: %+v, %d stops", e, queued.stops)
	}

	_, p2 := tr.StartProcess(context.Background(), Creation{}, Message{Destination: "f"})
	tb.Put("H:1", Entry{Process: p2})
	if e, _ := tb.Get("H:1"); e.Process != p2 || held.stops != 1 {
		t.Fatalf("after a Put with its own span: %+v, %d stops", e, held.stops)
	}
	got := rec.Ended()
	if len(got) != 1 || attrs(got[0].Attributes())["error.type"] != "evicted" {
		t.Fatalf("%d spans ended, want the replaced one as evicted", len(got))
	}
}
