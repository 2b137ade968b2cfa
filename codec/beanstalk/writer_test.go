package beanstalk

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// countingWriter records each Write.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

// TestWriterReplies writes every reply of the table through one Writer and
// checks the bytes: buffered until Flush, bodies of any size intact.
func TestWriterReplies(t *testing.T) {
	var out countingWriter
	w := NewWriter(&out)
	var want strings.Builder
	for _, tc := range replyTable {
		if err := w.WriteReply(&tc.r); err != nil {
			t.Fatal(err)
		}
		want.WriteString(tc.wire)
	}
	if w.Buffered() == 0 {
		t.Fatal("nothing buffered")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Buffered() != 0 {
		t.Fatal("Buffered after Flush")
	}
	if out.String() != want.String() {
		t.Fatalf("got %s, want %s", short(out.String()), short(want.String()))
	}
}

// TestWriterBuffers checks small replies make one write at Flush, and a
// big body goes out without a copy into the buffer.
func TestWriterBuffers(t *testing.T) {
	var out countingWriter
	w := NewWriter(&out)
	for range 100 {
		w.WriteReply(&Reply{Kind: Inserted, ID: 12345})
	}
	if out.writes != 0 {
		t.Fatalf("%d writes before Flush", out.writes)
	}
	w.Flush()
	if out.writes != 1 {
		t.Fatalf("%d writes", out.writes)
	}
	out.Reset()
	out.writes = 0
	body := []byte(x(3 * writeBufSize))
	w.WriteReply(&Reply{Kind: Inserted, ID: 1})
	w.WriteReply(&Reply{Kind: Reserved, ID: 2, Body: body})
	w.WriteReply(&Reply{Kind: Deleted})
	w.Flush()
	want := "INSERTED 1\r\nRESERVED 2 12288\r\n" + string(body) + "\r\nDELETED\r\n"
	if out.String() != want || out.writes != 3 {
		t.Fatalf("%d writes of %s", out.writes, short(out.String()))
	}
}

func TestWriterCommands(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	var want []byte
	for _, tc := range cmdTable {
		for _, r := range tc.want {
			if r.cmd != nil {
				if err := w.WriteCommand(r.cmd); err != nil {
					t.Fatal(err)
				}
				want = r.cmd.AppendTo(want)
			}
		}
	}
	w.Flush()
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatal("commands differ")
	}
	// A big put body still decodes.
	out.Reset()
	put := &Command{Verb: Put, TTR: 1, Body: []byte(x(10000))}
	w.WriteCommand(&Command{Verb: Use, Tube: []byte(x(5000))}) // too long a name: buffered anyway
	w.WriteCommand(put)
	w.Flush()
	if want := "use " + x(5000) + "\r\n" + string(put.AppendTo(nil)); out.String() != want {
		t.Fatal("big command differs")
	}
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter(io.Discard)
	if err := w.WriteReply(&Reply{}); err == nil {
		t.Fatal("invalid reply kind accepted")
	}
	if err := w.WriteCommand(&Command{}); err == nil {
		t.Fatal("invalid verb accepted")
	}
	if w.Buffered() != 0 {
		t.Fatal("invalid message buffered")
	}
	boom := errors.New("boom")
	w = NewWriter(errWriter{boom})
	w.WriteReply(&Reply{Kind: Deleted})
	if err := w.Flush(); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := w.WriteReply(&Reply{Kind: Deleted}); !errors.Is(err, boom) {
		t.Fatal("error not sticky:", err)
	}
	if err := w.WriteCommand(&Command{Verb: Stats}); !errors.Is(err, boom) {
		t.Fatal("error not sticky:", err)
	}
	w = NewWriter(errWriter{boom})
	if err := w.WriteReply(&Reply{Kind: Found, Body: []byte(x(10000))}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	w = NewWriter(shortWriter{})
	w.WriteReply(&Reply{Kind: Deleted})
	if err := w.Flush(); !errors.Is(err, io.ErrShortWrite) {
		t.Fatal(err)
	}
	// A full buffer whose flush fails fails the write.
	w = NewWriter(errWriter{boom})
	for i := 0; ; i++ {
		err := w.WriteReply(&Reply{Kind: Inserted, ID: 1})
		if err != nil {
			if !errors.Is(err, boom) || i < 100 {
				t.Fatal(i, err)
			}
			break
		}
	}
}

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }
