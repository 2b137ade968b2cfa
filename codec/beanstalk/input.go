package beanstalk

import (
	"bytes"
	"errors"
	"io"
)

// readBufSize is the size of a reader's buffer. It holds a command line and
// the body of a small job, so that a put of up to about 4 KB decodes with no
// allocation; larger bodies get a buffer of their own.
const readBufSize = 4096

// maxEmptyReads bounds the Read calls in a row that return (0, nil), as
// bufio does, so a broken io.Reader cannot spin us forever.
const maxEmptyReads = 100

// bigStart is the first size of a buffer for a body that does not fit in
// the read buffer. It doubles as the bytes arrive, so a peer announcing a
// large body makes us allocate only about what it actually sends.
const bigStart = 64 << 10

var crlf = []byte("\r\n")

var (
	// errLong reports a line longer than the limit (internal: the Reader
	// turns it into a ClientError, the ReplyReader into a ProtocolError).
	errLong = errors.New("line too long")
	// errBadRead reports an io.Reader returning an impossible count.
	errBadRead = errors.New("beanstalk: io.Reader returned an invalid count")
)

// input is the buffered byte stream under a Reader and a ReplyReader.
type input struct {
	rd   io.Reader
	buf  []byte
	r, w int   // buf[r:w] has been read from rd but not consumed
	rerr error // the error rd returned; sticky, reported once buf[r:w] is used up
}

func newInput(rd io.Reader, maxLine int) input {
	return input{rd: rd, buf: make([]byte, max(readBufSize, maxLine))}
}

// fill reads more bytes into buf, first moving the unconsumed ones to its
// front. It returns an error only when no byte was added.
func (in *input) fill() error {
	if in.rerr != nil {
		return in.rerr
	}
	if in.r > 0 {
		in.w = copy(in.buf, in.buf[in.r:in.w])
		in.r = 0
	}
	for range maxEmptyReads {
		n, err := in.rd.Read(in.buf[in.w:])
		if n < 0 || n > len(in.buf)-in.w {
			in.rerr = errBadRead
			return in.rerr
		}
		in.w += n
		if err != nil {
			in.rerr = err
		}
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	in.rerr = io.ErrNoProgress
	return in.rerr
}

// unexpected turns io.EOF into io.ErrUnexpectedEOF, for an end of input
// in the middle of a line or body.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readLine returns the next line, without its "\r\n"; it aliases buf until
// the next call. A line ends at the first "\r\n"; a lone '\r' or '\n' is part
// of the line.
//
// A line longer than max (counting its "\r\n") gives errLong. With skipLong,
// readLine first consumes the whole line, reading as far as its end, so the
// stream stays in sync; without it, it may stop as soon as max bytes show no
// end.
//
// An end of input before any byte of the line is io.EOF, inside it
// io.ErrUnexpectedEOF.
func (in *input) readLine(max int, skipLong bool) ([]byte, error) {
	scanned := 0 // bytes after r known to hold no complete "\r\n"
	for {
		from := in.r + scanned
		if i := bytes.Index(in.buf[from:in.w], crlf); i >= 0 {
			end := from + i
			line := in.buf[in.r:end:end]
			n := end + 2 - in.r
			in.r = end + 2
			if n > max {
				return nil, errLong
			}
			return line, nil
		}
		if in.w-in.r >= max {
			if skipLong {
				if err := in.skipLine(); err != nil {
					return nil, err
				}
			}
			return nil, errLong
		}
		scanned = in.w - in.r
		if scanned > 0 && in.buf[in.w-1] == '\r' {
			scanned-- // its '\n' may come with the next read
		}
		if err := in.fill(); err != nil {
			if in.w > in.r {
				return nil, unexpected(err)
			}
			return nil, err
		}
	}
}

// skipLine consumes bytes through the next "\r\n", holding at most one byte
// (a trailing '\r') back between reads: memory stays bounded however long
// the line is. (beanstalkd forgets a '\r' that ends one 224-byte chunk and
// so misses a "\r\n" split across two; we do not copy that.)
func (in *input) skipLine() error {
	for {
		if i := bytes.Index(in.buf[in.r:in.w], crlf); i >= 0 {
			in.r += i + 2
			return nil
		}
		if in.w > in.r && in.buf[in.w-1] == '\r' {
			in.r = in.w - 1
		} else {
			in.r = in.w
		}
		if err := in.fill(); err != nil {
			return unexpected(err)
		}
	}
}

// readFull consumes and returns the next n bytes. The result aliases buf
// until the next call, or, when n exceeds buf, is a new slice.
func (in *input) readFull(n int) ([]byte, error) {
	if n <= len(in.buf) {
		for in.w-in.r < n {
			if err := in.fill(); err != nil {
				return nil, unexpected(err)
			}
		}
		b := in.buf[in.r : in.r+n : in.r+n]
		in.r += n
		return b, nil
	}
	// Larger than buf, so buf holds only part of it: take that part, then
	// read the rest straight into the body buffer, never past its end.
	b := make([]byte, 0, min(n, bigStart))
	b = append(b, in.buf[in.r:in.w]...)
	in.r = in.w
	empty := 0
	for len(b) < n {
		if in.rerr != nil {
			return nil, unexpected(in.rerr)
		}
		if len(b) == cap(b) {
			b = append(make([]byte, 0, min(n, 2*cap(b))), b...)
		}
		m, err := in.rd.Read(b[len(b):cap(b)])
		if m < 0 || m > cap(b)-len(b) {
			in.rerr = errBadRead
			continue
		}
		b = b[:len(b)+m]
		if err != nil {
			in.rerr = err
		}
		if m > 0 {
			empty = 0
		} else if empty++; empty == maxEmptyReads && in.rerr == nil {
			in.rerr = io.ErrNoProgress
		}
	}
	return b[:n:n], nil
}

// discard consumes the next n bytes without keeping them.
func (in *input) discard(n uint64) error {
	k := min(uint64(in.w-in.r), n)
	in.r += int(k)
	n -= k
	for n > 0 {
		in.r, in.w = 0, 0
		if err := in.fill(); err != nil {
			return unexpected(err)
		}
		k = min(uint64(in.w), n)
		in.r = int(k)
		n -= k
	}
	return nil
}
