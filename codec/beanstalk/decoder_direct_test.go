package beanstalk

import (
	"bytes"
	"errors"
	"testing"
)

// feedSplit offers data to d in two reads split at s, the second going
// first into d.Room as a loop's read does, and returns what it decoded
// and how many puts came with BodyOwned.
func feedSplit(t *testing.T, d *Decoder, data []byte, s int) (out []result, owned int) {
	t.Helper()
	var buf []byte
	decode := func() {
		for {
			n, c, err := d.Decode(buf)
			var ce *ClientError
			switch {
			case errors.As(err, &ce):
				out = append(out, result{err: ce.Kind})
			case err != nil:
				t.Fatalf("split at %d: %v", s, err)
			case c != nil:
				if c.BodyOwned {
					owned++
					if cap(c.Body) != len(c.Body) {
						t.Fatalf("split at %d: owned body of %d bytes has cap %d", s, len(c.Body), cap(c.Body))
					}
				}
				out = append(out, result{cmd: cloneCommand(c)})
			}
			buf = buf[n:]
			if n == 0 {
				return
			}
		}
	}
	buf = append(buf, data[:s]...)
	decode()
	rest := data[s:]
	if r := d.Room(); len(r) > 0 {
		if len(buf) > 0 {
			t.Fatalf("split at %d: %d bytes buffered while the body waits", s, len(buf))
		}
		m := copy(r, rest)
		d.Filled(m)
		rest = rest[m:]
	}
	buf = append(buf, rest...)
	decode()
	if len(buf) > 0 || d.Partial() {
		t.Fatalf("split at %d: %q left, partial %v", s, buf, d.Partial())
	}
	return out, owned
}

// TestDecoderDirectBodySplit: a put whose body goes into a buffer of its
// own decodes the same wherever the input is split, at the smallest
// direct size and at the maximum job size; one byte over the maximum is
// JOB_TOO_BIG and a body not ended by "\r\n" is EXPECTED_CRLF, and the
// next command is decoded either way.
func TestDecoderDirectBodySplit(t *testing.T) {
	const direct, maxJob = 64, 300
	lim := Limits{MaxJobSize: maxJob}
	stats := result{cmd: &Command{Verb: Stats}}
	for _, tc := range []struct {
		name string
		data string
		want []result
		// owned: the put's body is its own whenever the first read holds
		// its line but not its end.
		owned bool
	}{
		{"smallest", "put 1 2 3 64\r\n" + x(64) + "\r\nstats\r\n",
			[]result{{cmd: &Command{Verb: Put, Pri: 1, Delay: 2, TTR: 3, Body: []byte(x(64))}}, stats}, true},
		{"max job size", "put 1 2 3 300\r\n" + x(300) + "\r\nstats\r\n",
			[]result{{cmd: &Command{Verb: Put, Pri: 1, Delay: 2, TTR: 3, Body: []byte(x(300))}}, stats}, true},
		{"one over", "put 1 2 3 301\r\n" + x(301) + "\r\nstats\r\n",
			[]result{{err: JobTooBig}, stats}, false},
		{"no CRLF", "put 1 2 3 100\r\n" + x(100) + "XYstats\r\n",
			[]result{{err: ExpectedCRLF}, stats}, false},
		{"below direct", "put 1 2 3 63\r\n" + x(63) + "\r\nstats\r\n",
			[]result{{cmd: &Command{Verb: Put, Pri: 1, Delay: 2, TTR: 3, Body: []byte(x(63))}}, stats}, false},
	} {
		data := []byte(tc.data)
		line := bytes.Index(data, crlf) + 2
		end := bytes.Index(data, []byte("stats"))
		for s := 0; s <= len(data); s++ {
			d := NewDecoder(lim)
			d.DirectMin = direct
			got, owned := feedSplit(t, d, data, s)
			if !equalResults(got, tc.want) {
				t.Fatalf("%s, split at %d: got %v, want %v", tc.name, s, got, tc.want)
			}
			wantOwned := 0
			if tc.owned && s >= line && s < end {
				wantOwned = 1
			}
			if owned != wantOwned {
				t.Fatalf("%s, split at %d: %d owned bodies, want %d", tc.name, s, owned, wantOwned)
			}
		}
	}
}

// TestDecoderDirectNeed: a body the decoder reads into its own buffer asks
// for no room in the caller's.
func TestDecoderDirectNeed(t *testing.T) {
	d := NewDecoder(Limits{})
	d.DirectMin = 4096
	if n := d.Need([]byte("put 0 0 1 5000\r\nab")); n != 0 {
		t.Fatalf("Need of a direct body = %d, want 0", n)
	}
	if n := d.Need([]byte("put 0 0 1 4000\r\nab")); n != 16+4002 {
		t.Fatalf("Need below DirectMin = %d, want %d", n, 16+4002)
	}
}
