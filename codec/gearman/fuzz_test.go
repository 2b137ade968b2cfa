package gearman

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz seed files from seedStreams")

// fuzzLimits are small so that every limit is reachable by the fuzzer.
var fuzzLimits = Limits{MaxPacketSize: 1 << 12, MaxLineSize: 64, MaxHandleSize: 16, MaxUniqueSize: 16}

// seedStreams are real frames and streams: the protocol document's session,
// every packet type, admin lines, mixes, and each kind of bad input.
func seedStreams() map[string][]byte {
	s := map[string][]byte{}
	var session []byte
	for _, step := range exampleSession {
		b, _ := hexDecode(step.hex)
		session = append(session, b...)
	}
	s["example-session"] = session
	typs, _, frames := allTypes()
	for i, typ := range typs {
		s["type-"+strings.ToLower(typ.String())] = frames[i]
	}
	s["admin-lines"] = []byte("status\nworkers\r\nmaxqueue fn 10\nshow jobs \r\n\n")
	s["mixed"] = cat([]byte("status\n"), req(16, "ping"), []byte("workers\r\n"), req(7, "fn\x00\x00data"), res(13, "H:1\x00r"))
	s["bad-magic"] = cat([]byte("\x00REX\x00\x00\x00\x10\x00\x00\x00\x00"), echoNext)
	s["unknown-type"] = cat(req(99, "xx"), req(5, ""), echoNext)
	s["too-large"] = cat(req(7, strings.Repeat("d", 5000)), echoNext)
	s["too-few-args"] = cat(req(36, "fn\x00u\x00d"), res(20, ""), echoNext)
	s["line-too-long"] = cat([]byte(strings.Repeat("L", 100)+"\n"), echoNext)
	s["long-handle"] = cat(req(14, strings.Repeat("h", 20)), req(7, "f\x00"+strings.Repeat("u", 20)+"\x00d"))
	s["grab-with-body"] = req(9, "junk")
	s["truncated"] = req(16, "abcdef")[:15]
	return s
}

func hexDecode(s string) ([]byte, error) {
	var b []byte
	for _, f := range strings.Fields(s) {
		for len(f) >= 2 {
			v, err := strconv.ParseUint(f[:2], 16, 8)
			if err != nil {
				return nil, err
			}
			b = append(b, byte(v))
			f = f[2:]
		}
	}
	return b, nil
}

// TestSeedCorpus keeps the committed corpus in step with seedStreams; run
// with -update-corpus to rewrite it.
func TestSeedCorpus(t *testing.T) {
	for target, seeds := range map[string]map[string][]byte{
		"FuzzReader":          seedStreams(),
		"FuzzUnmarshalBinary": singlePackets(),
		"FuzzAdminFields":     adminSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, data := range seeds {
			path := filepath.Join(dir, name)
			want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
			if *updateCorpus {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("%s is missing or stale (go test -run TestSeedCorpus -update-corpus)", path)
			}
		}
	}
}

func singlePackets() map[string][]byte {
	s := map[string][]byte{}
	for name, data := range seedStreams() {
		var p Packet
		if p.UnmarshalBinary(data) == nil || strings.HasPrefix(name, "type-") {
			s[name] = data
		}
	}
	s["trailing-byte"] = append(req(16, "x"), 'y')
	s["short"] = req(16, "x")[:11]
	return s
}

func adminSeeds() map[string][]byte {
	return map[string][]byte{
		"status":       []byte("status"),
		"maxqueue":     []byte("maxqueue fn 1 2 3"),
		"trailing":     []byte("show jobs "),
		"leading":      []byte(" status"),
		"empty":        []byte(""),
		"runs":         []byte("a   b  c "),
		"tab":          []byte("show\tjobs"),
		"cancel":       []byte("cancel job H:lap:1"),
		"only-spaces":  []byte("   "),
		"six-words":    []byte("a b c d e f"),
		"single-space": []byte(" "),
	}
}

func addSeeds(f *testing.F, seeds map[string][]byte) {
	for _, data := range seeds {
		f.Add(data)
	}
}

// samePacket compares two frames completely (String shortens arguments).
func sameFrame(a, b *Frame) bool {
	if a.Kind != b.Kind || a.CRLF != b.CRLF || !bytes.Equal(a.Text, b.Text) ||
		a.Packet.Magic != b.Packet.Magic || a.Packet.Type != b.Packet.Type ||
		len(a.Packet.Args) != len(b.Packet.Args) {
		return false
	}
	for i := range a.Packet.Args {
		if !bytes.Equal(a.Packet.Args[i], b.Packet.Args[i]) {
			return false
		}
	}
	return true
}

// FuzzReader: decoding never panics; a stream decodes the same whole, one
// byte at a time, and read into Space in chunks as an event loop does;
// every decoded frame re-encodes (by AppendTo and by the
// Writer, identically) to bytes that decode to the same frame.
func FuzzReader(f *testing.F) {
	addSeeds(f, seedStreams())
	f.Fuzz(func(t *testing.T, data []byte) {
		whole := decodeAll(bytes.NewReader(data), fuzzLimits)
		if oneByte := decodeAll(iotest.OneByteReader(bytes.NewReader(data)), fuzzLimits); !equalStrings(whole, oneByte) {
			t.Fatalf("one byte at a time:\n%s\nwhole:\n%s", strings.Join(oneByte, "\n"), strings.Join(whole, "\n"))
		}
		for seed := range 3 {
			if spaced := decodeSpace(data, fuzzLimits, seed+len(data)); !equalStrings(whole, spaced) {
				t.Fatalf("through Space, seed %d:\n%s\nwhole:\n%s", seed, strings.Join(spaced, "\n"), strings.Join(whole, "\n"))
			}
		}

		r := NewReader(bytes.NewReader(data), fuzzLimits)
		for i := 0; ; i++ {
			if i > len(data) {
				t.Fatal("more frames than bytes")
			}
			fr, err := r.ReadFrame()
			if err == io.EOF || IsFatal(err) {
				return
			}
			if fr.Kind == 0 {
				if err == nil {
					t.Fatal("no frame and no error")
				}
				continue
			}
			enc := fr.AppendTo(nil)
			var out bytes.Buffer
			w := NewWriterSize(&out, 64)
			if werr := w.WriteFrame(&fr); werr != nil {
				t.Fatalf("WriteFrame(%s): %v", fr.String(), werr)
			}
			w.Flush()
			if !bytes.Equal(out.Bytes(), enc) {
				t.Fatalf("Writer and AppendTo differ for %s:\n%q\n%q", fr.String(), out.Bytes(), enc)
			}
			again, err2 := NewReader(bytes.NewReader(enc), fuzzLimits).ReadFrame()
			if (err == nil) != (err2 == nil) || !sameFrame(&fr, &again) {
				t.Fatalf("re-decoded %s (%v), want %s (%v)", again.String(), err2, fr.String(), err)
			}
		}
	})
}

// FuzzUnmarshalBinary: never panics; a decoded packet validates and
// re-encodes to the input byte for byte (or, for a type without arguments
// whose ignored body was not empty, to the same packet).
func FuzzUnmarshalBinary(f *testing.F) {
	addSeeds(f, singlePackets())
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Packet
		if err := p.UnmarshalBinary(data); err != nil {
			return
		}
		enc, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %s does not validate: %v", p.String(), err)
		}
		if bytes.Equal(enc, data) {
			return
		}
		if p.Type.NumArgs() != 0 {
			t.Fatalf("re-encoded %q, input %q", enc, data)
		}
		var q Packet
		if err := q.UnmarshalBinary(enc); err != nil || q.String() != p.String() {
			t.Fatalf("re-decoded %s, %v", q.String(), err)
		}
	})
}

// FuzzAdminFields: never panics; words hold no space, only the first and
// last may be empty, and joining them with single spaces splits back to the
// same words.
func FuzzAdminFields(f *testing.F) {
	addSeeds(f, adminSeeds())
	f.Fuzz(func(t *testing.T, line []byte) {
		words := AppendAdminFields(nil, line)
		if len(words) == 0 {
			t.Fatal("no words")
		}
		total := 0
		for i, w := range words {
			total += len(w)
			if bytes.IndexByte(w, ' ') >= 0 {
				t.Fatalf("word %q holds a space", w)
			}
			if len(w) == 0 && i != 0 && i != len(words)-1 {
				t.Fatalf("empty word %d of %d in %q", i, len(words), line)
			}
		}
		if total+len(words)-1 > len(line) {
			t.Fatalf("words longer than the line")
		}
		again := AppendAdminFields(nil, bytes.Join(words, []byte(" ")))
		if fmt.Sprintf("%q", again) != fmt.Sprintf("%q", words) {
			t.Fatalf("re-split %q, want %q", again, words)
		}
	})
}
