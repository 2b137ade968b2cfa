package main

import (
	"math/bits"
	"time"
)

// hdrHist is a fixed-size log-linear latency histogram in the spirit of
// HdrHistogram: each power of two of nanoseconds is split into
// 1<<hdrSubBits linear buckets, so a recorded value is off by at most
// 1/32 (about 3%). Recording is a few instructions and never allocates,
// which keeps the load generator's own cost per operation low; a slice of
// samples would grow and then be sorted.
//
// A hdrHist is not safe for concurrent use: each client owns one and the
// run merges them at the end.
type hdrHist struct {
	counts [hdrBuckets]uint64
	n      uint64
	max    int64
}

const (
	hdrSubBits = 5                              // 32 linear buckets per power of two
	hdrSub     = 1 << hdrSubBits                //
	hdrBuckets = (64 - hdrSubBits + 1) * hdrSub // enough for any int64
)

// record adds one latency.
func (h *hdrHist) record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[hdrIndex(uint64(v))]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

// hdrIndex maps a value to its bucket: values below hdrSub get a bucket
// each; above, the top hdrSubBits+1 bits select it.
func hdrIndex(v uint64) int {
	if v < hdrSub {
		return int(v)
	}
	shift := bits.Len64(v) - hdrSubBits - 1
	return (shift+1)*hdrSub + int(v>>uint(shift)) - hdrSub
}

// hdrValue is the largest value bucket i holds, so percentiles are never
// reported lower than measured.
func hdrValue(i int) int64 {
	if i < hdrSub {
		return int64(i)
	}
	shift := i/hdrSub - 1
	base := uint64(i%hdrSub+hdrSub) << uint(shift)
	return int64(base + (1 << uint(shift)) - 1)
}

// merge adds o's counts to h.
func (h *hdrHist) merge(o *hdrHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the latency at or below which a fraction q of the
// samples lie (q=1 gives the maximum), or 0 when there are none.
func (h *hdrHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(q*float64(h.n)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(hdrValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}
