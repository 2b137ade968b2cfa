package tracing

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestLeanHeadCache: spans whose first attributes repeat, change, need
// their invalid UTF-8 replaced or are too long to cache are encoded as the
// SDK's exporter would, in a batch that cycles through more combinations
// than the cache keeps.
func TestLeanHeadCache(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dests := []string{"a", "b", "bad\xff", "", strings.Repeat("long", 200), "c", "a"}
	var spans []*leanSpan
	for i := range 60 {
		d := dests[i%len(dests)]
		s := testSpan(r, "process", d, "H:x:1", "", "v", int64(i), false, 0)
		if i%3 == 0 {
			s.opType = "send"
		}
		spans = append(spans, s)
	}
	checkEncoding(t, spans)

	// Every entry in use; the long one never kept, the one with invalid
	// UTF-8 never matched (its encoding holds the replacement instead).
	var c leanHeadCache
	for _, s := range spans {
		c.appendHead(nil, s)
	}
	bad := headFields(testSpan(r, "process", "bad\xff", "", "", "", 0, false, 0))
	for _, e := range c.ent {
		if !e.used {
			t.Fatal("an entry of the cache is unused after 60 spans")
		}
		if len(e.enc) > maxLeanHeadEntry {
			t.Fatalf("cached an entry of %d bytes", len(e.enc))
		}
		if e.matches(&bad) {
			t.Fatalf("an entry %q matches a destination with invalid UTF-8", e.enc)
		}
	}
}
