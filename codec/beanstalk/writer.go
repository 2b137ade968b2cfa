package beanstalk

import (
	"fmt"
	"io"
)

// writeBufSize is the size of a Writer's buffer. A body that does not fit
// goes to the connection straight from the caller's slice, uncopied.
const writeBufSize = 4096

// lineRoom is more than any reply or command line takes besides its tube
// name: "RESERVED " and two 20-digit numbers come to 52 bytes.
const lineRoom = 64

// Writer is a buffered writer of replies (server side) and commands (client
// side). Nothing reaches the connection until the buffer is full or Flush is
// called, so a read loop can answer pipelined commands with one write: flush
// when the Reader has nothing more buffered. It is not safe for concurrent
// use.
//
// A write error is sticky: every later call returns it.
type Writer struct {
	w   io.Writer
	buf []byte // pending bytes; cap(buf) is the buffer size
	err error
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, writeBufSize)}
}

// Buffered returns the number of bytes written to the buffer but not yet to
// the connection.
func (w *Writer) Buffered() int { return len(w.buf) }

// Flush writes the buffered bytes to the connection.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.writeOut(w.buf); err != nil {
		return err
	}
	w.buf = w.buf[:0]
	return nil
}

// writeOut writes b to the connection, bypassing the buffer.
func (w *Writer) writeOut(b []byte) error {
	n, err := w.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("beanstalk: writing: %w", err)
	}
	return w.err
}

// WriteReply buffers r's exact wire form (see Reply.AppendTo). An invalid
// Kind is an error that writes nothing.
func (w *Writer) WriteReply(r *Reply) error {
	if w.err != nil {
		return w.err
	}
	if !r.Kind.valid() {
		return fmt.Errorf("beanstalk: write of invalid reply kind %d", r.Kind)
	}
	var body []byte
	if r.Kind.HasBody() {
		body = r.Body
	}
	fits := w.room(len(r.Tube), len(body))
	switch {
	case w.err != nil:
	case fits || !r.Kind.HasBody():
		w.buf = r.AppendTo(w.buf)
	default:
		w.buf = r.appendLine(w.buf)
		w.writeBody(body)
	}
	return w.err
}

// WriteCommand buffers c's wire form (see Command.AppendTo). An invalid Verb
// is an error that writes nothing.
func (w *Writer) WriteCommand(c *Command) error {
	if w.err != nil {
		return w.err
	}
	if !c.Verb.valid() {
		return fmt.Errorf("beanstalk: write of invalid verb %d", c.Verb)
	}
	var body []byte
	if c.Verb == Put {
		body = c.Body
	}
	fits := w.room(len(c.Tube), len(body))
	switch {
	case w.err != nil:
	case fits || c.Verb != Put:
		w.buf = c.AppendTo(w.buf)
	default:
		w.buf = c.appendLine(w.buf)
		w.writeBody(body)
	}
	return w.err
}

// room makes room in the buffer for a message of a line of at most
// lineRoom+tube bytes and a body of body bytes, flushing only if that
// helps, and reports whether the whole message now fits. If it does not,
// at least its line does, to go out with what is buffered before it. So
// append never grows the buffer, except for an oversized tube name.
func (w *Writer) room(tube, body int) bool {
	line := lineRoom + tube
	msg := line + body + 2
	if len(w.buf)+msg <= cap(w.buf) {
		return true
	}
	if msg <= cap(w.buf) || len(w.buf)+line > cap(w.buf) {
		w.Flush()
	}
	return msg <= cap(w.buf)
}

// writeBody finishes a message too big for the buffer, whose line is
// buffered: the line goes out, then the body, then its "\r\n" is buffered.
// Errors land in w.err.
func (w *Writer) writeBody(body []byte) {
	if w.Flush() == nil && w.writeOut(body) == nil {
		w.buf = append(w.buf, "\r\n"...)
	}
}
