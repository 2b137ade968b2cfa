package gearman

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestWritePacketBuffersUntilFlush(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	if err := w.WritePacket(Res, JobCreated, []byte("H:lap:1")); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(Res, Noop); err != nil {
		t.Fatal(err)
	}
	want := cat(res(8, "H:lap:1"), res(6, ""))
	if out.Len() != 0 || w.Buffered() != len(want) {
		t.Fatalf("before Flush: wrote %d, buffered %d", out.Len(), w.Buffered())
	}
	if w.Available() != w.Size()-len(want) || w.Size() != DefaultWriterSize {
		t.Errorf("Available %d, Size %d", w.Available(), w.Size())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) || w.Buffered() != 0 {
		t.Fatalf("after Flush: %q, buffered %d", out.Bytes(), w.Buffered())
	}
	if err := w.Flush(); err != nil || out.Len() != len(want) {
		t.Fatalf("empty Flush: %v", err)
	}
}

// countingWriter records each Write call.
type countingWriter struct {
	bytes.Buffer
	writes []int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	return c.Buffer.Write(p)
}

// TestWriteLargePacket: packets larger than the buffer come out identical,
// and a large argument goes straight to the connection.
func TestWriteLargePacket(t *testing.T) {
	for _, size := range []int{64, 100, 4096} {
		data := bytes.Repeat([]byte("0123456789"), 1000)
		var out countingWriter
		w := NewWriterSize(&out, size)
		if err := w.WritePacket(Res, EchoRes, []byte("small")); err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(Res, JobAssignUniq, []byte("H:x:1"), []byte("fn"), []byte("u"), data); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteError(CodeJobNotFound, strings.Repeat("e", 3*size)); err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(Req, SubmitJob, []byte(strings.Repeat("f", 2*size)), []byte("u"), []byte("d")); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		want := cat(
			res(17, "small"),
			res(31, "H:x:1\x00fn\x00u\x00"+string(data)),
			res(19, "JOB_NOT_FOUND\x00"+strings.Repeat("e", 3*size)),
			req(7, strings.Repeat("f", 2*size)+"\x00u\x00d"),
		)
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("size %d: output differs", size)
		}
		direct := false
		for _, n := range out.writes {
			if n > size {
				direct = true // more than a buffer at once: not copied through it
			}
		}
		if !direct {
			t.Errorf("size %d: the %d-byte argument was copied through the buffer (writes %v)", size, len(data), out.writes)
		}
	}
}

func TestWritePacketValidates(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Magic
		typ  Type
		args []string
	}{
		{"bad magic", 0, Noop, nil},
		{"unknown type", Req, 5, nil},
		{"too few args", Req, SubmitJob, []string{"fn", "u"}},
		{"too many args", Res, Noop, []string{"x"}},
		{"NUL in function", Req, SubmitJob, []string{"f\x00n", "u", "d"}},
		{"NUL in unique", Req, SubmitJob, []string{"fn", "u\x00", "d"}},
	} {
		var out bytes.Buffer
		w := NewWriter(&out)
		err := w.WritePacket(c.m, c.typ, toBytes(c.args)...)
		if !errors.Is(err, ErrInvalidPacket) {
			t.Errorf("%s: got %v, want ErrInvalidPacket", c.name, err)
		}
		if w.Buffered() != 0 {
			t.Errorf("%s: %d bytes buffered", c.name, w.Buffered())
		}
		p := Packet{Magic: c.m, Type: c.typ, Args: toBytes(c.args)}
		if err := p.Validate(); !errors.Is(err, ErrInvalidPacket) {
			t.Errorf("%s: Validate = %v", c.name, err)
		}
		if _, err := p.MarshalBinary(); !errors.Is(err, ErrInvalidPacket) {
			t.Errorf("%s: MarshalBinary = %v", c.name, err)
		}
		// The writer is still usable.
		if err := w.WritePacket(Res, Noop); err != nil {
			t.Errorf("%s: writer broken after a rejected packet: %v", c.name, err)
		}
	}
	// NUL in the last argument is fine.
	if err := NewWriter(io.Discard).WritePacket(Res, WorkFail, []byte("H:x:1\x00")); err != nil {
		t.Errorf("NUL in last argument: %v", err)
	}
	if err := NewWriter(io.Discard).WriteError("BAD\x00CODE", "x"); !errors.Is(err, ErrInvalidPacket) {
		t.Errorf("NUL in error code: %v", err)
	}
}

func TestWriteError(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	for _, e := range []struct {
		code Code
		text string
	}{
		{CodeQueueError, TextJobQueueFull},
		{CodeJobNotFound, TextJobNotFoundWorkResult},
		{CodeInvalidCommand, TextCommandNotExpected},
		{CodeInvalidMagic, TextRequestMagicExpected},
		{CodeUnknownOption, TextUnknownOption},
		{CodeJobNotFound, TextJobDoesNotExist},
		{CodeJobNotFound, TextExceptionJobNotFound},
	} {
		if err := w.WriteError(e.code, e.text); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	// All but the first captured from gearmand 1.1.20.
	want := cat(
		res(19, "QUEUE_ERROR\x00Job queue is full"),
		[]byte("\x00RES\x00\x00\x00\x13\x00\x00\x000JOB_NOT_FOUND\x00Job given in work result not found"),
		[]byte("\x00RES\x00\x00\x00\x13\x00\x00\x00$INVALID_COMMAND\x00Command not expected"),
		[]byte("\x00RES\x00\x00\x00\x13\x00\x00\x00$INVALID_MAGIC\x00Request magic expected"),
		[]byte("\x00RES\x00\x00\x00\x13\x00\x00\x005UNKNOWN_OPTION\x00Server does not recognize given option"),
		[]byte("\x00RES\x00\x00\x00\x13\x00\x00\x00*JOB_NOT_FOUND\x00Job does not exist on server"),
		[]byte("\x00RES\x00\x00\x00\x13\x00\x00\x00EJOB_NOT_FOUND\x00An exception was received for a job that does not exist"),
	)
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("got\n%q\nwant\n%q", out.Bytes(), want)
	}
}

func TestWriteText(t *testing.T) {
	var out bytes.Buffer
	w := NewWriterSize(&out, 64)
	fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", "reverse", 1, 0, 2)
	w.WriteString(AdminEnd)
	w.WriteText([]byte(AdminOK))
	w.WriteText(AppendAdminUnknownCommand(nil, []byte("foo")))
	long := strings.Repeat("z", 200) + "\n"
	w.WriteString(long)
	w.Write([]byte(long))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "reverse\t1\t0\t2\n.\nOK\r\nERR UNKNOWN_COMMAND Unknown+server+commandfoo\r\n" + long + long
	if out.String() != want {
		t.Errorf("got %q\nwant %q", out.String(), want)
	}
}

func TestWriteFrameText(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	w.WriteFrame(&Frame{Kind: KindText, Text: []byte("status")})
	w.WriteFrame(&Frame{Kind: KindText, Text: []byte("workers"), CRLF: true})
	w.WriteFrame(&Frame{})
	w.Flush()
	if got := out.String(); got != "status\nworkers\r\n" {
		t.Errorf("got %q", got)
	}
}

// failWriter accepts n bytes, then fails.
type failWriter struct {
	n   int
	err error
}

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) <= f.n {
		f.n -= len(p)
		return len(p), nil
	}
	n := f.n
	f.n = 0
	return n, f.err
}

func TestWriteErrorsAreSticky(t *testing.T) {
	boom := errors.New("boom")
	w := NewWriterSize(&failWriter{n: 5, err: boom}, 64)
	w.WritePacket(Res, EchoRes, []byte("hello"))
	if err := w.Flush(); err != boom {
		t.Fatalf("Flush = %v, want boom", err)
	}
	if w.Buffered() != HeaderSize+5-5 {
		t.Errorf("unwritten bytes kept: %d", w.Buffered())
	}
	if err := w.WritePacket(Res, Noop); err != boom {
		t.Errorf("WritePacket after error = %v", err)
	}
	if err := w.WriteError(CodeQueueError, "x"); err != boom {
		t.Errorf("WriteError after error = %v", err)
	}
	if _, err := w.WriteString("x"); err != boom {
		t.Errorf("WriteString after error = %v", err)
	}
	if _, err := w.Write([]byte("x")); err != boom {
		t.Errorf("Write after error = %v", err)
	}
	if err := w.WriteText([]byte("x")); err != boom {
		t.Errorf("WriteText after error = %v", err)
	}
	if err := w.Flush(); err != boom {
		t.Errorf("Flush after error = %v", err)
	}

	// A short write without an error is io.ErrShortWrite.
	w = NewWriterSize(&shortWriter{}, 64)
	w.WritePacket(Res, Noop)
	if err := w.Flush(); err != io.ErrShortWrite {
		t.Errorf("short write: %v", err)
	}
	w = NewWriterSize(&shortWriter{}, 64)
	if err := w.WritePacket(Res, EchoRes, make([]byte, 1000)); err != io.ErrShortWrite {
		t.Errorf("short direct write: %v", err)
	}

	// Reset clears the error.
	var out bytes.Buffer
	w.Reset(&out)
	if err := w.WritePacket(Res, Noop); err != nil || w.Flush() != nil || out.Len() != HeaderSize {
		t.Errorf("after Reset: %v, %d bytes", err, out.Len())
	}
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestAppendPacketAppends(t *testing.T) {
	dst := []byte("prefix")
	dst = AppendPacket(dst, Req, CanDo, []byte("reverse"))
	dst = AppendPacket(dst, Req, GrabJob)
	want := cat([]byte("prefix"), req(1, "reverse"), req(9, ""))
	if !bytes.Equal(dst, want) {
		t.Errorf("got %q", dst)
	}
	// An invalid magic cannot decode.
	var p Packet
	if err := p.UnmarshalBinary(AppendPacket(nil, 0, Noop)); !errors.Is(err, ErrBadMagic) {
		t.Errorf("invalid magic decoded: %v", err)
	}
}
