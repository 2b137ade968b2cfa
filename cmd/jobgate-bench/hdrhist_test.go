package main

import (
	"testing"
	"time"
)

func TestHdrHistBuckets(t *testing.T) {
	// Every value lands in a bucket whose upper bound is at least the
	// value and within 1/32 of it.
	for _, v := range []uint64{0, 1, 31, 32, 33, 63, 64, 65, 1000, 123456, 1 << 40, 1<<62 + 12345} {
		i := hdrIndex(v)
		hi := uint64(hdrValue(i))
		if hi < v || float64(hi-v) > float64(v)/hdrSub+1 {
			t.Errorf("value %d: bucket %d tops at %d", v, i, hi)
		}
		if i > 0 && uint64(hdrValue(i-1)) >= v {
			t.Errorf("value %d: previous bucket %d already holds it", v, i-1)
		}
	}
}

func TestHdrHistQuantiles(t *testing.T) {
	var h, a, b hdrHist
	for i := 1; i <= 1000; i++ {
		d := time.Duration(i) * time.Microsecond
		if i%2 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	h.merge(&a)
	h.merge(&b)
	if h.n != 1000 || h.quantile(1) != time.Millisecond {
		t.Fatalf("n=%d max=%v", h.n, h.quantile(1))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}} {
		got := h.quantile(c.q)
		if got < c.want || float64(got-c.want) > float64(c.want)/hdrSub {
			t.Errorf("q%.2f = %v, want %v within 1/32", c.q, got, c.want)
		}
	}
	var empty hdrHist
	if empty.quantile(0.5) != 0 {
		t.Fatal("empty histogram")
	}
}
