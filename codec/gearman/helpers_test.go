package gearman

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"
	"testing/iotest"
)

// unhex decodes hex digits, ignoring whitespace, so golden bytes can be laid
// out like the protocol document's example.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// raw builds a binary frame by hand, independent of the encoder under test.
func raw(magic string, typ uint32, body string) []byte {
	b := make([]byte, 0, HeaderSize+len(body))
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint32(b, typ)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

func req(typ uint32, body string) []byte { return raw("\x00REQ", typ, body) }
func res(typ uint32, body string) []byte { return raw("\x00RES", typ, body) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// event renders one ReadFrame result so that whole decodes can be compared.
func event(f Frame, err error) string {
	s := f.String()
	if err == nil {
		return s
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		s = fmt.Sprintf("ERR %v fatal=%v code=%s text=%q frame=%s", pe.Err, pe.Fatal, pe.Code, pe.Text, s)
		return s
	}
	return "ERR " + err.Error()
}

// decodeAll reads frames until io.EOF or a fatal error and renders them.
func decodeAll(rd io.Reader, lim Limits) []string {
	r := NewReader(rd, lim)
	var out []string
	for i := 0; i < 100000; i++ {
		f, err := r.ReadFrame()
		if err == io.EOF {
			return out
		}
		out = append(out, event(f, err))
		if IsFatal(err) {
			return out
		}
	}
	panic("decodeAll: no end")
}

// errNotRead is what spaceFeed's Reader returns while the bytes of the
// current readiness have all been handed over, as an event loop's socket
// returns "would block".
var errNotRead = errors.New("not read yet")

// decodeSpace decodes data as an event loop that batches its reads does:
// before each round it copies the next chunk (sizes from seed) into the
// Reader's Space and reports it with Filled, then reads frames until the
// Reader asks the socket for more. A Space too small for the chunk takes
// what fits, and an empty one leaves the round's read to the Reader, as
// the loop does, which then grows its buffer.
func decodeSpace(data []byte, lim Limits, seed int) []string {
	feed := &spaceFeed{data: data}
	r := NewReader(feed, lim)
	var out []string
	rng := rand.New(rand.NewSource(int64(seed)))
	for round := 0; round < 1000000; round++ {
		chunk := 1 + rng.Intn(100)
		if rng.Intn(3) == 0 {
			chunk = 1 + rng.Intn(6000)
		}
		feed.chunk, feed.armed = chunk, true
		if space := r.Space(); len(space) > 0 && len(feed.data) > 0 {
			n := copy(space, feed.data[:min(chunk, len(feed.data))])
			feed.data = feed.data[n:]
			feed.armed = false
			r.Filled(n)
		}
		for {
			f, err := r.ReadFrame()
			if err == errNotRead {
				break
			}
			if err == io.EOF {
				return out
			}
			out = append(out, event(f, err))
			if IsFatal(err) {
				return out
			}
		}
	}
	panic("decodeSpace: no end")
}

// spaceFeed is decodeSpace's socket: one read of at most chunk bytes per
// round while armed, then errNotRead; io.EOF once all is read.
type spaceFeed struct {
	data  []byte
	chunk int
	armed bool
}

func (f *spaceFeed) Read(p []byte) (int, error) {
	if !f.armed {
		if len(f.data) == 0 {
			return 0, io.EOF
		}
		return 0, errNotRead
	}
	f.armed = false
	if len(f.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.data[:min(f.chunk, len(f.data))])
	f.data = f.data[n:]
	return n, nil
}

// chunkReader returns its chunks one Read at a time, never merging them.
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	return n, nil
}

func splitAt(data []byte, i int) io.Reader {
	return &chunkReader{chunks: [][]byte{data[:i:i], data[i:]}}
}

// readers returns every way a test stream is fed: whole, one byte at a
// time, in halves, with the final data arriving together with io.EOF.
func readers(data []byte) map[string]io.Reader {
	return map[string]io.Reader{
		"one-byte": iotest.OneByteReader(&chunkReader{chunks: [][]byte{data}}),
		"half":     iotest.HalfReader(&chunkReader{chunks: [][]byte{data}}),
		"data-err": iotest.DataErrReader(&chunkReader{chunks: [][]byte{data}}),
	}
}

// checkSplits asserts that data decodes the same however it is split.
func checkSplits(t *testing.T, data []byte, lim Limits, everyPosition bool) {
	t.Helper()
	want := decodeAll(&chunkReader{chunks: [][]byte{data}}, lim)
	for name, rd := range readers(data) {
		if got := decodeAll(rd, lim); !equalStrings(got, want) {
			t.Errorf("%s: got\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if !everyPosition {
		return
	}
	for i := 0; i <= len(data); i++ {
		if got := decodeAll(splitAt(data, i), lim); !equalStrings(got, want) {
			t.Fatalf("split at %d: got\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// loopReader serves data over and over, for steady-state benchmarks.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.data[l.off:])
		n += c
		l.off = (l.off + c) % len(l.data)
	}
	return n, nil
}
