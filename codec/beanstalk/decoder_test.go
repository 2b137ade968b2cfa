package beanstalk

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// decodeChunks feeds data to a Decoder chunk bytes at a time, the way an
// event loop offers what each read brought, and collects what it decodes.
// The second result says whether bytes of an unfinished command were left.
func decodeChunks(data []byte, chunk int, lim Limits) ([]result, bool) {
	d := NewDecoder(lim)
	var out []result
	var buf []byte
	for len(data) > 0 || len(buf) > 0 {
		k := min(chunk, len(data))
		buf = append(buf, data[:k]...)
		data = data[k:]
		for {
			n, c, err := d.Decode(buf)
			var ce *ClientError
			switch {
			case errors.As(err, &ce):
				out = append(out, result{err: ce.Kind})
			case err != nil:
				panic(err)
			case c != nil:
				out = append(out, result{cmd: cloneCommand(c)})
			}
			buf = buf[n:]
			if n == 0 || len(buf) == 0 && c == nil && err == nil {
				break
			}
		}
		if k == 0 {
			break // no more input and no progress
		}
	}
	return out, len(buf) > 0 || d.Partial()
}

// checkDecoder checks that a Decoder, fed data in pieces of every size
// given, decodes exactly what a Reader does, and is left in the middle of
// a command exactly when the Reader ends in io.ErrUnexpectedEOF.
func checkDecoder(t *testing.T, data []byte, lim Limits) {
	t.Helper()
	want, err := decodeAll(bytes.NewReader(data), lim)
	unfinished := errors.Is(err, io.ErrUnexpectedEOF)
	for _, chunk := range []int{1, 2, 3, 7, 64, 1 << 20} {
		got, partial := decodeChunks(data, chunk, lim)
		if !equalResults(got, want) || partial != unfinished {
			t.Fatalf("%q in pieces of %d: decoder %v (partial %v), reader %v (%v)", data, chunk, got, partial, want, err)
		}
	}
}

// TestDecoderMatchesReader runs the command table and the fuzz seeds
// through both decoders.
func TestDecoderMatchesReader(t *testing.T) {
	for _, s := range commandSeeds() {
		checkDecoder(t, s, fuzzLimits)
		checkDecoder(t, s, Limits{})
	}
	checkDecoder(t, []byte("put 0 0 1 70000\r\n"+x(70000)+"\r\nstats\r\n"), Limits{})
	checkDecoder(t, []byte(x(300)+"\r"+"\nstats\r\n"), Limits{})
	checkDecoder(t, []byte(x(300)+"\r"), Limits{})
	checkDecoder(t, []byte("put 0 0 1 600\r\n"+x(100)), fuzzLimits)
}

// TestDecoderNeed checks the size hint of a put whose body is on its way.
func TestDecoderNeed(t *testing.T) {
	d := NewDecoder(Limits{})
	if n := d.Need([]byte("put 0 0 1 5000\r\nab")); n != 16+5002 {
		t.Fatalf("Need = %d, want %d", n, 16+5002)
	}
	if n := d.Need([]byte("stats\r\n")); n != 0 {
		t.Fatalf("Need of stats = %d", n)
	}
}

// FuzzDecoder checks the Decoder against the Reader on any input.
func FuzzDecoder(f *testing.F) {
	for _, s := range commandSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoder(t, data, fuzzLimits) })
}
