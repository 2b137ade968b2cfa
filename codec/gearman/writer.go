package gearman

import (
	"io"
	"math"
	"strings"
)

// DefaultWriterSize is the buffer size NewWriter uses.
const DefaultWriterSize = 4096

// Writer encodes frames onto a Gearman connection through a buffer that is
// written out when full or on Flush. Packets that fit the buffer are encoded
// into it with no allocation; arguments larger than the buffer go straight
// to the connection instead of being copied.
//
// After a write error every method returns that error. A Writer is not safe
// for concurrent use; whoever owns the connection's output serialises it.
type Writer struct {
	wr  io.Writer
	buf []byte // pending bytes; cap(buf) is the buffer size
	err error
}

// NewWriter returns a Writer with a DefaultWriterSize buffer.
func NewWriter(wr io.Writer) *Writer { return NewWriterSize(wr, DefaultWriterSize) }

// NewWriterSize returns a Writer whose buffer holds size bytes (at least
// 64).
func NewWriterSize(wr io.Writer, size int) *Writer {
	return &Writer{wr: wr, buf: make([]byte, 0, max(size, 64))}
}

// Reset discards pending bytes and any error and makes w write to wr.
func (w *Writer) Reset(wr io.Writer) {
	w.wr, w.buf, w.err = wr, w.buf[:0], nil
}

// Buffered returns the number of bytes written into the buffer and not yet
// flushed.
func (w *Writer) Buffered() int { return len(w.buf) }

// Available returns the free space in the buffer.
func (w *Writer) Available() int { return cap(w.buf) - len(w.buf) }

// Size returns the size of the buffer.
func (w *Writer) Size() int { return cap(w.buf) }

// Flush writes the buffered bytes to the connection.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.wr.Write(w.buf)
	if n < len(w.buf) && err == nil {
		err = io.ErrShortWrite
	}
	if err != nil {
		if n > 0 && n < len(w.buf) {
			w.buf = w.buf[:copy(w.buf, w.buf[n:])]
		}
		w.err = err
		return err
	}
	w.buf = w.buf[:0]
	return nil
}

// WritePacket writes one binary packet: the header, then args joined by NUL.
// It first checks the packet as Packet.Validate does and writes nothing if
// that fails (the error wraps ErrInvalidPacket). It does not flush.
func (w *Writer) WritePacket(m Magic, t Type, args ...[]byte) error {
	if w.err != nil {
		return w.err
	}
	size, err := validate(m, t, args)
	if err != nil {
		return err
	}
	if HeaderSize+size <= w.Available() {
		w.buf = AppendPacket(w.buf, m, t, args...)
		return nil
	}
	w.header(m, t, size)
	for i, a := range args {
		if i > 0 {
			w.writeByte(0)
		}
		w.write(a)
	}
	return w.err
}

// WriteFrame writes f as it was read: a packet, or a text line with its
// original line ending. Packets are validated as in WritePacket; a zero
// Frame writes nothing.
func (w *Writer) WriteFrame(f *Frame) error {
	switch f.Kind {
	case KindPacket:
		return w.WritePacket(f.Packet.Magic, f.Packet.Type, f.Packet.Args...)
	case KindText:
		w.write(f.Text)
		if f.CRLF {
			w.writeByte('\r')
		}
		w.writeByte('\n')
	}
	return w.err
}

// WriteError writes an ERROR response, "code\0text", e.g.
// WriteError(CodeQueueError, TextJobQueueFull). code must not contain NUL.
func (w *Writer) WriteError(code Code, text string) error {
	if w.err != nil {
		return w.err
	}
	if strings.IndexByte(string(code), 0) >= 0 {
		return invalidPacket(Res, Error, "NUL byte in error code")
	}
	size := len(code) + 1 + len(text)
	if uint64(size) > math.MaxUint32 {
		return invalidPacket(Res, Error, "body over 4 GiB")
	}
	w.header(Res, Error, size)
	w.writeString(string(code))
	w.writeByte(0)
	w.writeString(text)
	return w.err
}

// WriteText writes an admin reply verbatim. The caller supplies the line
// endings, because gearmand's replies mix "\r\n" ("OK\r\n") and "\n"
// (".\n", "OK 1.1.20\n"); see the Admin* constants.
func (w *Writer) WriteText(text []byte) error {
	w.write(text)
	return w.err
}

// Write writes p verbatim, like WriteText; it makes a Writer an io.Writer
// so that admin replies can be formatted with fmt.Fprintf.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.write(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// WriteString writes s verbatim, like Write.
func (w *Writer) WriteString(s string) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.writeString(s)
	if w.err != nil {
		return 0, w.err
	}
	return len(s), nil
}

// header writes a packet header, flushing first if it does not fit.
func (w *Writer) header(m Magic, t Type, size int) {
	if w.Available() < HeaderSize {
		if w.Flush() != nil {
			return
		}
	}
	b0, b1, b2, b3 := magicBytes(m)
	w.buf = append(w.buf, b0, b1, b2, b3,
		byte(t>>24), byte(t>>16), byte(t>>8), byte(t),
		byte(size>>24), byte(size>>16), byte(size>>8), byte(size))
}

func (w *Writer) writeByte(c byte) {
	if w.err != nil {
		return
	}
	if w.Available() == 0 && w.Flush() != nil {
		return
	}
	w.buf = append(w.buf, c)
}

// write buffers p, or writes it straight through when it is larger than the
// buffer and nothing is pending, saving a copy of large workloads.
func (w *Writer) write(p []byte) {
	for len(p) > w.Available() && w.err == nil {
		if len(w.buf) == 0 {
			n, err := w.wr.Write(p)
			if n < len(p) && err == nil {
				err = io.ErrShortWrite
			}
			w.err = err
			return
		}
		n := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+n]
		p = p[n:]
		w.Flush()
	}
	if w.err != nil {
		return
	}
	w.buf = append(w.buf, p...)
}

func (w *Writer) writeString(s string) {
	for len(s) > w.Available() && w.err == nil {
		if len(w.buf) == 0 {
			n, err := io.WriteString(w.wr, s)
			if n < len(s) && err == nil {
				err = io.ErrShortWrite
			}
			w.err = err
			return
		}
		n := copy(w.buf[len(w.buf):cap(w.buf)], s)
		w.buf = w.buf[:len(w.buf)+n]
		s = s[n:]
		w.Flush()
	}
	if w.err != nil {
		return
	}
	w.buf = append(w.buf, s...)
}
