package tracing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

func TestTableLRU(t *testing.T) {
	tb := NewTable[string](3)
	for i := range 3 {
		tb.Put(fmt.Sprint(i), Entry{Attempts: i})
	}
	// Touch 0 so 1 is now the least recently used.
	if e, ok := tb.Get("0"); !ok || e.Attempts != 0 {
		t.Fatalf("Get(0) = %+v, %v", e, ok)
	}
	tb.Put("3", Entry{Attempts: 3})
	if _, ok := tb.Get("1"); ok {
		t.Fatal("1 should have been evicted")
	}
	if tb.Len() != 3 || tb.Evicted() != 1 {
		t.Fatalf("Len %d Evicted %d, want 3 and 1", tb.Len(), tb.Evicted())
	}
	// Update counts as a use: 2 survives, 0 goes.
	if !tb.Update("2", func(e *Entry) { e.Attempts = 20 }) {
		t.Fatal("Update(2) found nothing")
	}
	tb.Put("4", Entry{})
	tb.Put("3", Entry{Attempts: 33}) // replacing evicts nothing
	for key, want := range map[string]bool{"0": false, "2": true, "3": true, "4": true} {
		if _, ok := tb.Get(key); ok != want {
			t.Errorf("Get(%s) present=%v, want %v", key, ok, want)
		}
	}
	if e, _ := tb.Get("2"); e.Attempts != 20 {
		t.Errorf("Update lost: %+v", e)
	}
	if e, ok := tb.Delete("3"); !ok || e.Attempts != 33 {
		t.Errorf("Delete(3) = %+v, %v", e, ok)
	}
	if _, ok := tb.Delete("3"); ok || tb.Update("3", func(*Entry) {}) {
		t.Error("3 still there after Delete")
	}
	if tb.Len() != 2 || tb.Evicted() != 2 {
		t.Errorf("Len %d Evicted %d, want 2 and 2", tb.Len(), tb.Evicted())
	}
	if NewTable[int](0).max != 1 {
		t.Error("a zero cap should become 1")
	}
}

// TestTablePutCoalesced: an entry with the same Unique as a new one
// without a process span is kept (a coalesced Gearman submit); one with
// another Unique, or none, is replaced (a handle given again), and an
// entry with a process span replaces any.
func TestTablePutCoalesced(t *testing.T) {
	tb := NewTable[string](4)
	tb.Put("h1", Entry{Attempts: 1, Unique: "u"})
	tb.Put("h1", Entry{Attempts: 2, Unique: "u"})
	if e, _ := tb.Get("h1"); e.Attempts != 1 {
		t.Fatalf("same unique id: %+v, want the first entry kept", e)
	}
	tb.Put("h1", Entry{Attempts: 3, Unique: "v"})
	if e, _ := tb.Get("h1"); e.Attempts != 3 {
		t.Fatalf("another unique id: %+v, want it replaced", e)
	}
	tb.Put("h2", Entry{Attempts: 1})
	tb.Put("h2", Entry{Attempts: 2})
	if e, _ := tb.Get("h2"); e.Attempts != 2 {
		t.Fatalf("no unique id: %+v, want it replaced", e)
	}
	if tb.Len() != 2 || tb.Evicted() != 0 {
		t.Fatalf("Len %d Evicted %d, want 2 and 0", tb.Len(), tb.Evicted())
	}
}

// TestTableEvictionEndsSpan: an evicted entry's open process span is ended
// and marked, so it reaches Jaeger instead of vanishing.
func TestTableEvictionEndsSpan(t *testing.T) {
	tr, rec := recorded(t, Gearman, Config{})
	tb := NewTable[string](1)
	_, p := tr.StartProcess(context.Background(), Creation{}, Message{Destination: "f"})
	tb.Put("H:1", Entry{Process: p, Enqueued: time.Now()})
	tb.Put("H:2", Entry{})
	got := rec.Ended()
	if len(got) != 1 {
		t.Fatalf("%d spans ended by eviction, want 1", len(got))
	}
	a := attrs(got[0].Attributes())
	if a["error.type"] != "evicted" || a["jobgate.job.outcome"] != "evicted" || got[0].Status().Code != codes.Error {
		t.Fatalf("evicted span: %v %v", sorted(a), got[0].Status())
	}
}

func TestTableEndOpen(t *testing.T) {
	tr, rec := recorded(t, Beanstalk, Config{})
	tb := NewTable[uint64](10)
	for id := range uint64(4) {
		var p Process
		if id%2 == 0 {
			_, p = tr.StartProcess(context.Background(), Creation{}, Message{Destination: "t"})
		}
		tb.Put(id, Entry{Process: p})
	}
	if n := tb.EndOpen("shutdown"); n != 2 {
		t.Fatalf("EndOpen ended %d, want 2", n)
	}
	if n := tb.EndOpen("shutdown"); n != 0 {
		t.Fatalf("second EndOpen ended %d, want 0", n)
	}
	for _, s := range rec.Ended() {
		if v, _ := attrs(s.Attributes())["error.type"].(string); v != "shutdown" {
			t.Errorf("error.type %q, want shutdown", v)
		}
	}
	if len(rec.Ended()) != 2 || tb.Len() != 4 {
		t.Fatalf("%d spans, %d entries; want 2 and 4", len(rec.Ended()), tb.Len())
	}
}

// TestTableConcurrent hammers one small table from many goroutines; run
// under -race it checks the locking, and the list must stay consistent.
func TestTableConcurrent(t *testing.T) {
	tr, _ := recorded(t, Gearman, Config{})
	tb := NewTable[int](64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := (g*7919 + i) % 200
				switch i % 5 {
				case 0:
					_, p := tr.StartProcess(context.Background(), Creation{}, Message{})
					tb.Put(k, Entry{Process: p})
				case 1:
					tb.Get(k)
				case 2:
					tb.Update(k, func(e *Entry) { e.Attempts++ })
				case 3:
					if e, ok := tb.Delete(k); ok {
						e.Process.Complete()
					}
				case 4:
					tb.Put(k, Entry{Creation: CreationOf(trace.SpanContext{})})
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for node := tb.root.next; node != &tb.root; node = node.next {
		if node.next.prev != node {
			t.Fatal("recency list broken")
		}
		n++
	}
	if n != tb.Len() || n > 64 {
		t.Fatalf("list has %d nodes, map %d, cap 64", n, tb.Len())
	}
}
