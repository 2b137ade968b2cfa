package beanstalk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

// decodeChunks feeds data to a Decoder chunk bytes at a time, the way an
// event loop offers what each read brought, and collects what it decodes.
// The second result says whether bytes of an unfinished command were left.
func decodeChunks(data []byte, chunk int, lim Limits) ([]result, bool) {
	return decodeChunksDirect(data, chunk, lim, 0, false)
}

// decodeChunksDirect is decodeChunks with Decoder.DirectMin set to direct;
// with room, each piece goes first into the decoder's Room, as an event
// loop's read does, and only the rest to Decode. Every owned body must be
// exactly its length.
func decodeChunksDirect(data []byte, chunk int, lim Limits, direct int, room bool) ([]result, bool) {
	d := NewDecoder(lim)
	d.DirectMin = direct
	var out []result
	var buf []byte
	for len(data) > 0 || len(buf) > 0 {
		k := min(chunk, len(data))
		piece := data[:k]
		if r := d.Room(); room && len(r) > 0 {
			if len(buf) > 0 {
				panic("bytes buffered while a body waits for its room")
			}
			m := copy(r, piece)
			d.Filled(m)
			piece = piece[m:]
		}
		buf = append(buf, piece...)
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
				if c.BodyOwned && (len(c.Body) < direct || cap(c.Body) != len(c.Body)) {
					panic(fmt.Sprintf("owned body of %d bytes, cap %d, DirectMin %d", len(c.Body), cap(c.Body), direct))
				}
				c2 := cloneCommand(c)
				c2.BodyOwned = false
				out = append(out, result{cmd: c2})
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
		for _, direct := range []int{1, 5, 4096} {
			for _, room := range []bool{false, true} {
				got, partial := decodeChunksDirect(data, chunk, lim, direct, room)
				if !equalResults(got, want) || partial != unfinished {
					t.Fatalf("%q in pieces of %d, DirectMin %d, room %v: decoder %v (partial %v), reader %v (%v)",
						data, chunk, direct, room, got, partial, want, err)
				}
			}
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
