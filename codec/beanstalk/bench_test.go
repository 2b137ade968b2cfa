package beanstalk

import (
	"io"
	"testing"
)

// loopReader repeats data forever, filling every Read, like a busy socket.
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

var (
	putInput     = "put 1024 0 60 100\r\n" + x(100) + "\r\n"
	reserveInput = "reserve\r\n"
	deleteInput  = "delete 123456789\r\n"
)

func benchRead(b *testing.B, input string) {
	r := NewReader(&loopReader{data: []byte(input)}, Limits{})
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ReadCommand(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadPut(b *testing.B)     { benchRead(b, putInput) }
func BenchmarkReadReserve(b *testing.B) { benchRead(b, reserveInput) }
func BenchmarkReadDelete(b *testing.B)  { benchRead(b, deleteInput) }

func benchWrite(b *testing.B, rep *Reply) {
	w := NewWriter(io.Discard)
	b.SetBytes(int64(len(rep.AppendTo(nil))))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteReply(rep); err != nil {
			b.Fatal(err)
		}
	}
	w.Flush()
}

func BenchmarkWriteReserved(b *testing.B) {
	benchWrite(b, &Reply{Kind: Reserved, ID: 123456789, Body: []byte(x(100))})
}

func BenchmarkWriteInserted(b *testing.B) {
	benchWrite(b, &Reply{Kind: Inserted, ID: 123456789})
}

func BenchmarkReadReplyReserved(b *testing.B) {
	input := "RESERVED 123456789 100\r\n" + x(100) + "\r\n"
	r := NewReplyReader(&loopReader{data: []byte(input)}, Limits{})
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ReadReply(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestZeroAllocs asserts the steady state allocates nothing: decoding
// commands (good and bad) and replies, encoding and writing replies and
// commands, and building YAML in a reused builder.
func TestZeroAllocs(t *testing.T) {
	reader := func(input string) func() {
		r := NewReader(&loopReader{data: []byte(input)}, Limits{})
		return func() { r.ReadCommand() }
	}
	replyReader := func(input string) func() {
		r := NewReplyReader(&loopReader{data: []byte(input)}, Limits{})
		return func() { r.ReadReply() }
	}
	w := NewWriter(io.Discard)
	reserved := &Reply{Kind: Reserved, ID: 123456789, Body: []byte(x(100))}
	put := &Command{Verb: Put, Pri: 1, TTR: 60, Body: []byte(x(100))}
	dst := make([]byte, 0, 1024)
	var yb YAMLBuilder
	for name, f := range map[string]func(){
		"read put":            reader(putInput),
		"read reserve":        reader(reserveInput),
		"read delete":         reader(deleteInput),
		"read mixed":          reader("use foo\r\n" + putInput + "pause-tube foo 5\r\nkick -1\r\nrelease 1 2 3\r\nquit\r\n"),
		"read bad":            reader("delete x\r\nnope\r\nput 0 0 1 70000\r\n" + x(70002) + "put 0 0 1 1\r\nxyz" + x(300) + "\r\n"),
		"read reply reserved": replyReader("RESERVED 123456789 100\r\n" + x(100) + "\r\n"),
		"read reply mixed":    replyReader("INSERTED 5\r\nUSING foo\r\nKICKED\r\nOK 14\r\n---\n- default\n\r\nNOT_FOUND\r\n"),
		"write reserved":      func() { w.WriteReply(reserved); w.Flush() },
		"write inserted":      func() { w.WriteReply(&Reply{Kind: Inserted, ID: 123456789}) },
		"write put":           func() { w.WriteCommand(put) },
		"append reserved":     func() { dst = reserved.AppendTo(dst[:0]) },
		"append put":          func() { dst = put.AppendTo(dst[:0]) },
		"yaml list":           func() { yb.Reset(); yb.Item("default"); yb.Item("foo"); yb.Bytes() },
		"yaml dict":           func() { yb.Reset(); yb.Uint("id", 5); yb.Quoted("tube", "default"); yb.Seconds("t", 5) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocs per run", name, n)
		}
	}
}
