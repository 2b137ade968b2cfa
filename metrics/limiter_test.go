package metrics

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/prometheus/client_golang/prometheus"
)

func TestLimiterCapAndSpecialNames(t *testing.T) {
	var made []string
	l := NewLimiter(3, func(label string) string { made = append(made, label); return "v:" + label })
	for _, c := range []struct{ name, want string }{
		{"a", "v:a"},
		{Overflow, "v:" + Overflow},                          // the overflow name itself: shared, not admitted
		{"bad\xff", "v:" + Overflow},                         // not UTF-8
		{strings.Repeat("x", MaxNameLen+1), "v:" + Overflow}, // too long
		{strings.Repeat("y", MaxNameLen), "v:" + strings.Repeat("y", MaxNameLen)},
		{"", "v:"},
		{"b", "v:" + Overflow}, // cap of 3 reached
		{"a", "v:a"},
	} {
		if got := l.Get(c.name); got != c.want {
			t.Errorf("Get(%.10q) = %.12q, want %.12q", c.name, got, c.want)
		}
		if got := l.GetBytes([]byte(c.name)); got != c.want {
			t.Errorf("GetBytes(%.10q) = %.12q, want %.12q", c.name, got, c.want)
		}
	}
	if l.Len() != 3 || l.Max() != 3 {
		t.Errorf("Len, Max = %d, %d, want 3, 3", l.Len(), l.Max())
	}
	if len(made) != 4 {
		t.Errorf("newFunc called for %d labels, want 4 (3 names and the overflow)", len(made))
	}
	if NewLimiter(-1, func(string) int { return 0 }).Max() != 0 || NewLimiter(1<<30, func(string) int { return 0 }).Max() != MaxNamesLimit {
		t.Error("cap not clamped")
	}
}

// TestLimiterConcurrent races admissions: exactly max names are admitted,
// each made once, and every goroutine agrees on every name's value.
func TestLimiterConcurrent(t *testing.T) {
	const max, names, workers = 50, 200, 8
	var calls atomic.Int32
	l := NewLimiter(max, func(label string) *string { calls.Add(1); return &label })
	results := make([][names]*string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range names {
				n := (i*7 + w*13) % names // each worker in its own order
				results[w][n] = l.GetBytes(fmt.Appendf(nil, "n%d", n))
			}
		})
	}
	wg.Wait()
	if l.Len() != max || calls.Load() != max+1 {
		t.Fatalf("Len %d, newFunc calls %d; want %d, %d", l.Len(), calls.Load(), max, max+1)
	}
	own := 0
	for n := range names {
		v := results[0][n]
		for w := 1; w < workers; w++ {
			if results[w][n] != v {
				t.Fatalf("name n%d: workers disagree", n)
			}
		}
		if *v != Overflow {
			own++
			if *v != fmt.Sprintf("n%d", n) {
				t.Fatalf("name n%d got value %q", n, *v)
			}
		}
	}
	if own != max {
		t.Errorf("%d names with their own value, want %d", own, max)
	}
}

// TestLimiterAdmitAfterRacingAdmission: a name that another goroutine
// admitted between this one's lock-free lookup and its admission, taking
// the last place, gets its own value, not the overflow. admit is called
// directly, as the slow path is after a lookup that missed.
func TestLimiterAdmitAfterRacingAdmission(t *testing.T) {
	l := NewLimiter(2, func(label string) string { return "v:" + label })
	l.Get("a")
	l.Get("b") // the cap is reached with b
	if got := l.admit("b", nil); got != "v:b" {
		t.Errorf("admit(b) = %q, want v:b", got)
	}
	if got := l.admit("", []byte("b")); got != "v:b" {
		t.Errorf("admit([]byte(b)) = %q, want v:b", got)
	}
	if got := l.admit("c", nil); got != "v:"+Overflow {
		t.Errorf("admit(c) = %q, want the overflow", got)
	}
}

func BenchmarkCommandCount(b *testing.B) {
	m := New(Options{NoRuntimeCollectors: true})
	b.ReportAllocs()
	for b.Loop() {
		m.Commands.Beanstalk(bscodec.Put, ResultOK)
	}
}

func BenchmarkCommandCountParallel(b *testing.B) {
	m := New(Options{NoRuntimeCollectors: true})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Commands.Beanstalk(bscodec.Reserve, ResultOK)
		}
	})
}

// BenchmarkCounterVecWithLabelValues is the baseline the cached handles
// avoid: resolving the series through client_golang on every count.
func BenchmarkCounterVecWithLabelValues(b *testing.B) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"protocol", "command", "result"})
	b.ReportAllocs()
	for b.Loop() {
		v.WithLabelValues("beanstalk", "put", "ok").Inc()
	}
}

func BenchmarkLimiterKnownBytes(b *testing.B) {
	m := New(Options{NoRuntimeCollectors: true})
	for i := range 1000 {
		m.Job(Gearman, fmt.Sprintf("function-%d", i))
	}
	name := []byte("function-500")
	b.ReportAllocs()
	for b.Loop() {
		m.JobBytes(Gearman, name)
	}
}

func BenchmarkLimiterOverflowBytes(b *testing.B) {
	m := New(Options{MaxNames: 10, NoRuntimeCollectors: true})
	for i := range 10 {
		m.Job(Gearman, fmt.Sprintf("function-%d", i))
	}
	name := []byte("function-not-admitted")
	b.ReportAllocs()
	for b.Loop() {
		m.JobBytes(Gearman, name)
	}
}

func BenchmarkJobSubmittedParallel(b *testing.B) {
	m := New(Options{NoRuntimeCollectors: true})
	name := []byte("emails")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.JobBytes(Beanstalk, name).Submitted()
		}
	})
}

func BenchmarkJobStartedHistogram(b *testing.B) {
	m := New(Options{NoRuntimeCollectors: true})
	s := m.Job(Beanstalk, "emails")
	b.ReportAllocs()
	for b.Loop() {
		s.Started(1500000)
	}
}
