package journal

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// TestFrameLayout pins the on-disk format: changing it breaks every
// existing journal, so it must be a deliberate, versioned change.
func TestFrameLayout(t *testing.T) {
	got := appendFrame(nil, Record{Key: 0x0102030405060708, Kind: Update, Data: []byte("hi")})
	// The CRC-32C was checked with an independent bitwise implementation.
	const want = "239b3cac" + "02000000" + "02" + "0807060504030201" + "6869"
	if hex.EncodeToString(got) != want {
		t.Fatalf("frame = %x, want %s", got, want)
	}
	if h := hex.EncodeToString(segmentHeader(0x2a)); h != "4a474a524e4c0001"+"2a00000000000000" {
		t.Fatalf("segment header = %s", h)
	}
	if segmentName(0x2a) != "000000000000002a.jnl" {
		t.Fatalf("segment name = %s", segmentName(0x2a))
	}
	for _, bad := range []string{"000000000000002a.jn", "00000000000002a.jnl", "000000000000000g.jnl", "0000000000000000.jnl"} {
		if _, ok := parseSegmentName(bad); ok {
			t.Errorf("parseSegmentName(%q) accepted", bad)
		}
	}
}

func segmentBytes(recs []Record) []byte {
	b := segmentHeader(1)
	for _, r := range recs {
		b = appendFrame(b, r)
	}
	return b
}

// FuzzScanFrames: whatever the bytes, scanning never panics or allocates
// beyond the input, stops exactly where the good frames end, and the
// frames it accepts re-encode to the bytes it read.
func FuzzScanFrames(f *testing.F) {
	good := segmentBytes(someRecords(5))
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(append(bytes.Clone(good), make([]byte, 40)...))
	f.Add(segmentHeader(1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var buf []byte
		var recs []Record
		res, err := scanFrames(bytes.NewReader(in), int64(len(in)), 1, "fuzz", &buf, func(r Record) error {
			r.Data = bytes.Clone(r.Data)
			recs = append(recs, r)
			return nil
		})
		if errors.Is(err, ErrFormat) {
			return
		}
		if err != nil {
			t.Fatalf("error from an in-memory reader: %v", err)
		}
		short := res.end < int64(len(in))
		if res.end > int64(len(in)) || short != (res.damage != "") && len(in) > 0 {
			t.Fatalf("end %d of %d, damage %q", res.end, len(in), res.damage)
		}
		if cap(buf) > len(in) {
			t.Fatalf("buffer of %d bytes for %d bytes of input", cap(buf), len(in))
		}
		if res.end == 0 {
			if len(recs) != 0 {
				t.Fatal("records from a segment with a bad header")
			}
			return
		}
		if re := segmentBytes(recs); !bytes.Equal(re, in[:res.end]) {
			t.Fatalf("accepted frames re-encode differently")
		}
	})
}
