package tracing

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestLeanHeadCache: spans whose name and first attributes repeat,
// change, need their invalid UTF-8 replaced or are too long to cache are
// encoded as the SDK's exporter would, in a batch that cycles through more
// combinations than the cache keeps. Names that are written alike from
// different parts ("a b" with no destination, "a" with destination "b")
// may share an entry; the bytes are the same.
func TestLeanHeadCache(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dests := []string{"a", "b", "bad\xff", "", strings.Repeat("long", 200), "c", "a"}
	names := []string{"process", "receive", "send", "process a", "x\xfe", ""}
	var spans []*leanSpan
	for i := range 90 {
		d := dests[i%len(dests)]
		s := testSpan(r, names[i%len(names)], d, "H:x:1", "", "v", int64(i), false, 0)
		if i%3 == 0 {
			s.opType = "send"
		}
		if i%5 == 0 { // a name without destination, sometimes equal to one with
			s.name, s.nameDest = "process a", ""
		}
		spans = append(spans, s)
	}
	checkEncoding(t, spans)

	// Every entry in use; the long one never kept, the one with invalid
	// UTF-8 never matched (its encoding holds the replacement instead).
	var c leanHeadCache
	for _, s := range spans {
		c.lookup(s)
	}
	bad := headFields(testSpan(r, "process", "bad\xff", "", "", "", 0, false, 0))
	for _, e := range c.ent {
		if !e.used {
			t.Fatal("an entry of the cache is unused after 60 spans")
		}
		if len(e.enc) > maxLeanHeadEntry {
			t.Fatalf("cached an entry of %d bytes", len(e.enc))
		}
		if e.matches(&bad, "process", "bad\xff") || e.matches(&bad, "x\xfe", "") {
			t.Fatalf("an entry %q matches a destination with invalid UTF-8", e.enc)
		}
	}
}

// TestLeanMsgIDHead: numeric message ids under prefixes that repeat,
// alternate, need their invalid UTF-8 replaced or are too long to cache,
// with numbers of one to twenty digits, are encoded as the SDK's exporter
// would.
func TestLeanMsgIDHead(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	prefixes := []string{"H:x:", "H:x:", "H:y:", "bad\xff:", strings.Repeat("p", 81), strings.Repeat("q", 80), "", "H:x:"}
	nums := []uint64{1, 9, 10, 12345, 1 << 40, ^uint64(0)}
	var spans []*leanSpan
	for i := range 48 {
		s := testSpan(r, "process", "f", "", "", "v", int64(i), false, 0)
		s.msgID, s.msgIDPrefix, s.msgIDNum = "", prefixes[i%len(prefixes)], nums[i%len(nums)]
		spans = append(spans, s)
	}
	checkEncoding(t, spans)
}
