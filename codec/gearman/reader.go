package gearman

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strconv"
)

// Default limits, each matching what gearmand accepts.
const (
	// DefaultMaxPacketSize bounds a packet body. gearmand has no limit of its
	// own (it allocates whatever the 32-bit length says); 64 MiB keeps one
	// connection from pinning gigabytes.
	DefaultMaxPacketSize = 64 << 20
	// DefaultMaxLineSize bounds an admin line including its "\n": gearmand
	// parses lines inside its 8 KiB receive buffer (GEARMAND_RECV_BUFFER_SIZE)
	// and drops the connection when a longer one fills it.
	DefaultMaxLineSize = 8192
	// DefaultMaxHandleSize bounds a job handle in a request. The protocol
	// allows 64 bytes including the NUL terminator (GEARMAND_JOB_HANDLE_SIZE),
	// so 63 bytes of handle; gearmand rejects 64.
	DefaultMaxHandleSize = 63
	// DefaultMaxUniqueSize bounds a unique ID in a request; gearmand answers
	// a longer one with ERROR ARGUMENT_TOO_LARGE "Unique value too large".
	DefaultMaxUniqueSize = 64
)

// Limits bounds what a Reader accepts. A zero field takes its default.
type Limits struct {
	// MaxPacketSize is the largest packet body (the header's length field)
	// accepted. Larger packets are rejected with ErrTooLarge before any
	// buffer grows for them.
	MaxPacketSize int
	// MaxLineSize is the longest admin line accepted, counting its "\n".
	MaxLineSize int
	// MaxHandleSize is the longest job handle accepted in a request
	// ("\0REQ" packets). Negative disables the check.
	MaxHandleSize int
	// MaxUniqueSize is the longest unique ID accepted in a request.
	// Negative disables the check.
	MaxUniqueSize int
}

// withDefaults fills zero fields and clamps to what the wire can carry.
func (l Limits) withDefaults() Limits {
	if l.MaxPacketSize <= 0 {
		l.MaxPacketSize = DefaultMaxPacketSize
	}
	// The length field is 32 bits, and a packet's size must fit an int
	// (32-bit platforms).
	l.MaxPacketSize = int(min(uint64(l.MaxPacketSize), math.MaxUint32, uint64(math.MaxInt-HeaderSize)))
	if l.MaxLineSize <= 0 {
		l.MaxLineSize = DefaultMaxLineSize
	}
	if l.MaxHandleSize == 0 {
		l.MaxHandleSize = DefaultMaxHandleSize
	}
	if l.MaxUniqueSize == 0 {
		l.MaxUniqueSize = DefaultMaxUniqueSize
	}
	return l
}

// FrameKind tells a binary packet from an admin text line.
type FrameKind uint8

// The frame kinds. The zero FrameKind means "no frame".
const (
	KindPacket FrameKind = iota + 1
	KindText
)

// String returns "packet", "text" or "none".
func (k FrameKind) String() string {
	switch k {
	case KindPacket:
		return "packet"
	case KindText:
		return "text"
	}
	return "none"
}

// Frame is one unit read from a Gearman connection: a binary packet or an
// admin text line. A Frame returned by a Reader aliases the Reader's buffer
// and is valid only until the next call to the Reader.
type Frame struct {
	// Kind says which of Packet and Text holds the frame.
	Kind FrameKind
	// Packet is the binary packet when Kind is KindPacket.
	Packet Packet
	// Text is the admin line when Kind is KindText, without its "\n" and
	// without one "\r" before it.
	Text []byte
	// CRLF records that the line ended in "\r\n", so that re-encoding
	// reproduces it (gearmand mishandles some bare-"\n" commands).
	CRLF bool
}

// AppendTo appends the wire encoding of f to dst: the packet, or the line
// with its original ending. A zero Frame appends nothing.
func (f *Frame) AppendTo(dst []byte) []byte {
	switch f.Kind {
	case KindPacket:
		return f.Packet.AppendTo(dst)
	case KindText:
		dst = append(dst, f.Text...)
		if f.CRLF {
			dst = append(dst, '\r')
		}
		return append(dst, '\n')
	}
	return dst
}

// String formats f for logs and tests: the packet as Packet.String does, or
// TEXT with the quoted line.
func (f *Frame) String() string {
	switch f.Kind {
	case KindPacket:
		return f.Packet.String()
	case KindText:
		s := "TEXT " + strconv.Quote(string(f.Text))
		if f.CRLF {
			s += " CRLF"
		}
		return s
	}
	return "NONE"
}

const (
	minBufSize    = 4096
	maxIdleBuf    = 1 << 20 // a buffer grown past this is dropped once no frame needs it
	maxEmptyReads = 100     // consecutive (0, nil) reads before io.ErrNoProgress
)

// Reader decodes frames from a Gearman connection. It buffers its input;
// after the first frame, and as long as frames fit the buffer it has grown
// to, decoding allocates nothing. The buffer grows to hold the largest frame
// (never past the Limits); once grown past 1 MiB it is given back as soon as
// no frame needs it, so that idle connections stay small.
//
// A Reader is not safe for concurrent use; it is owned by the connection's
// read loop.
type Reader struct {
	rd  io.Reader
	lim Limits

	buf  []byte // len(buf) == cap(buf); the unread bytes are buf[r:w]
	r, w int

	skip     int64 // body bytes of a rejected packet still to discard
	skipLine bool  // discard through the next "\n" (rest of an over-long line)
	rerr     error // read error held back while buffered bytes remain
	fatal    error // sticky: the stream is out of sync

	args [MaxArgs][]byte // backing array for Frame.Packet.Args
	last []byte          // the last packet's wire bytes (LastPacket)
}

// NewReader returns a Reader that decodes frames from rd within lim (zero
// fields take the defaults).
func NewReader(rd io.Reader, lim Limits) *Reader {
	return &Reader{rd: rd, lim: lim.withDefaults(), buf: make([]byte, minBufSize)}
}

// Reset discards all state and makes the Reader read from rd, keeping its
// buffer and limits.
func (r *Reader) Reset(rd io.Reader) {
	buf, lim := r.buf, r.lim
	*r = Reader{rd: rd, lim: lim, buf: buf}
}

// Limits returns the limits in force, defaults filled in.
func (r *Reader) Limits() Limits { return r.lim }

// Buffered returns the number of bytes read from the connection and not yet
// decoded. A read loop flushes its replies when this is zero: nothing more
// can be answered without waiting for the peer.
func (r *Reader) Buffered() int { return r.w - r.r }

// FrameBuffered reports whether a whole frame is buffered, so the next
// ReadFrame returns without reading from the connection. A relay flushes
// what it forwarded when this is false: a partial frame may wait on the
// peer for as long as the peer likes.
func (r *Reader) FrameBuffered() bool {
	if r.fatal != nil || r.skip > 0 || r.skipLine || r.r == r.w {
		return false
	}
	b := r.buf[r.r:r.w]
	if b[0] != 0 {
		return bytes.IndexByte(b, '\n') >= 0
	}
	if len(b) < HeaderSize {
		return false
	}
	return int64(len(b)-HeaderSize) >= int64(binary.BigEndian.Uint32(b[8:]))
}

// Space returns the buffer's free room after the unread bytes, for a
// caller that reads the connection itself (an event loop batching the
// reads of many sockets) to read into and report with Filled; the next
// ReadFrame decodes what it holds before it reads. The unread bytes are
// moved to the front first when that makes room. Empty when the buffer is
// full: a ReadFrame then grows it, as a frame larger than it needs. Valid
// until the next call.
func (r *Reader) Space() []byte {
	if r.r == r.w {
		r.r, r.w = 0, 0
	} else if r.r > 0 && len(r.buf)-r.w < minBufSize/2 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	return r.buf[r.w:]
}

// Filled records that n bytes, at most len(Space()), were read into the
// room Space returned.
func (r *Reader) Filled(n int) {
	if n < 0 || n > len(r.buf)-r.w {
		panic("gearman: Filled beyond Space")
	}
	r.w += n
}

// LastPacket returns the wire bytes of the packet the last ReadFrame
// returned (with or without an error), or nil if it returned none. A relay
// that forwards the packet unchanged can copy these instead of encoding it
// again: decoding and encoding a packet give back the same bytes. They
// alias the buffer and are valid until the next call.
func (r *Reader) LastPacket() []byte { return r.last }

// ReadFrame reads the next frame. Whether it is binary or text is decided by
// its first byte, as gearmand does: NUL starts a binary packet, anything else
// an admin line ending in "\n". Both may be mixed on one connection.
//
// The Frame aliases the Reader's buffer and is valid until the next call.
//
// Errors:
//   - io.EOF: the connection ended cleanly between frames.
//   - io.ErrUnexpectedEOF: it ended inside a frame.
//   - *ProtocolError: malformed input; see its Fatal field and the sentinels
//     (ErrBadMagic, ErrUnknownType, ErrTooLarge, ErrTooFewArgs,
//     ErrLineTooLong, ErrHandleTooLong, ErrUniqueTooLong). After a non-fatal
//     one the next call reads the next frame. For ErrHandleTooLong and
//     ErrUniqueTooLong the decoded packet is returned with the error; for
//     the others the Frame is zero.
//   - anything else comes from the underlying reader. A read timeout leaves
//     the partial frame buffered, and the next call resumes it.
//
// Bodies of rejected packets and the rest of an over-long line are not read
// before the error is returned but at the start of the next call, so a
// caller that closes the connection never waits for them.
func (r *Reader) ReadFrame() (Frame, error) {
	r.last = nil
	if r.fatal != nil {
		return Frame{}, r.fatal
	}
	if r.skip > 0 || r.skipLine {
		if err := r.discard(); err != nil {
			return Frame{}, err
		}
	}
	if r.r == r.w {
		r.r, r.w = 0, 0
	}
	if len(r.buf) > maxIdleBuf && r.w-r.r <= minBufSize {
		// Give back the memory of an earlier large frame: idle
		// connections should not each keep megabytes.
		nb := make([]byte, minBufSize)
		r.w = copy(nb, r.buf[r.r:r.w])
		r.buf, r.r = nb, 0
	}
	if err := r.fill(1, 1); err != nil {
		return Frame{}, err // io.EOF here is a clean end
	}
	if r.buf[r.r] != 0 {
		return r.readLine()
	}
	return r.readPacket()
}

func (r *Reader) readPacket() (Frame, error) {
	// Check the magic as soon as it is here: a peer that is not speaking
	// binary Gearman should not be kept waiting for a full header.
	if err := r.fill(4, HeaderSize); err != nil {
		return Frame{}, noEOF(err)
	}
	m := parseMagic(r.buf[r.r:])
	if m == 0 {
		r.fatal = badMagic()
		return Frame{}, r.fatal
	}
	if err := r.fill(HeaderSize, HeaderSize); err != nil {
		return Frame{}, noEOF(err)
	}
	h := r.buf[r.r : r.r+HeaderSize]
	t := Type(binary.BigEndian.Uint32(h[4:]))
	size := int64(binary.BigEndian.Uint32(h[8:]))
	if !t.Valid() {
		r.r += HeaderSize
		r.skip = size
		return Frame{}, unknownType(m, t, size)
	}
	if size > int64(r.lim.MaxPacketSize) {
		// The magic was right, so the length can be trusted and skipping
		// the body keeps the stream in sync; the peer gets an ERROR instead
		// of a dropped connection, and skipping costs no memory.
		r.r += HeaderSize
		r.skip = size
		return Frame{}, &ProtocolError{Err: ErrTooLarge, Code: CodeArgumentTooLarge, Text: "Packet too large",
			Magic: m, Type: t, Size: size, Limit: int64(r.lim.MaxPacketSize)}
	}
	total := HeaderSize + int(size)
	if err := r.fill(total, total); err != nil {
		return Frame{}, noEOF(err)
	}
	body := r.buf[r.r+HeaderSize : r.r+total : r.r+total]
	raw := r.buf[r.r : r.r+total : r.r+total]
	r.r += total
	args, pe := splitArgs(m, t, body, r.args[:0])
	if pe != nil {
		return Frame{}, pe
	}
	f := Frame{Kind: KindPacket, Packet: Packet{Magic: m, Type: t, Args: args}}
	r.last = raw
	if m == Req {
		if pe := r.checkArgs(&f.Packet); pe != nil {
			return f, pe
		}
	}
	return f, nil
}

// checkArgs applies the handle and unique limits to a request.
func (r *Reader) checkArgs(p *Packet) *ProtocolError {
	if limit := r.lim.MaxHandleSize; limit >= 0 {
		if h := p.Handle(); len(h) > limit {
			text := "Job handle too large"
			if p.Type == WorkFail {
				text = TextHandleTooLargeWorkFail
			}
			return &ProtocolError{Err: ErrHandleTooLong, Code: CodeArgumentTooLarge, Text: text,
				Magic: p.Magic, Type: p.Type, Size: int64(len(h)), Limit: int64(limit)}
		}
	}
	if limit := r.lim.MaxUniqueSize; limit >= 0 {
		if u := p.Unique(); len(u) > limit {
			return &ProtocolError{Err: ErrUniqueTooLong, Code: CodeArgumentTooLarge, Text: TextUniqueTooLarge,
				Magic: p.Magic, Type: p.Type, Size: int64(len(u)), Limit: int64(limit)}
		}
	}
	return nil
}

func (r *Reader) readLine() (Frame, error) {
	limit := r.lim.MaxLineSize
	scanned := 0 // bytes after r.r known to hold no "\n"
	for {
		b := r.buf[r.r:r.w]
		if i := bytes.IndexByte(b[scanned:], '\n'); i >= 0 {
			end := scanned + i
			r.r += end + 1
			if end+1 > limit {
				return Frame{}, lineTooLong(end+1, limit)
			}
			f := Frame{Kind: KindText, Text: b[:end:end]}
			if end > 0 && b[end-1] == '\r' {
				f.Text, f.CRLF = b[:end-1:end-1], true
			}
			return f, nil
		}
		scanned = len(b)
		if scanned >= limit {
			r.r = r.w
			r.skipLine = true
			return Frame{}, lineTooLong(scanned, limit)
		}
		if err := r.fill(scanned+1, limit); err != nil {
			return Frame{}, noEOF(err)
		}
	}
}

func lineTooLong(size, limit int) *ProtocolError {
	return &ProtocolError{Err: ErrLineTooLong, Code: CodeArgumentTooLarge, Text: "Line too long",
		Size: int64(size), Limit: int64(limit)}
}

// discard drops what an earlier error left unread: a rejected packet body
// or the rest of an over-long line. Progress survives a read error.
func (r *Reader) discard() error {
	for r.skip > 0 {
		n := min(int64(r.w-r.r), r.skip)
		r.r += int(n)
		r.skip -= n
		if r.skip == 0 {
			break
		}
		r.r, r.w = 0, 0
		if err := r.fill(1, 1); err != nil {
			return noEOF(err)
		}
	}
	for r.skipLine {
		if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
			r.r += i + 1
			r.skipLine = false
			break
		}
		r.r, r.w = 0, 0
		if err := r.fill(1, 1); err != nil {
			return noEOF(err)
		}
	}
	return nil
}

// fill reads until at least n bytes are buffered. limit (>= n) caps how far
// the buffer may grow on the way, so it never exceeds what the frame being
// read may take.
func (r *Reader) fill(n, limit int) error {
	if r.w-r.r >= n {
		return nil
	}
	if len(r.buf)-r.r < n {
		r.makeRoom(n, limit)
	}
	for empty := 0; r.w-r.r < n; {
		if r.rerr != nil {
			err := r.rerr
			r.rerr = nil
			return err
		}
		m, err := r.rd.Read(r.buf[r.w:])
		if m < 0 || m > len(r.buf)-r.w {
			return errBadRead
		}
		r.w += m
		switch {
		case err != nil:
			r.rerr = err // returned once the buffered bytes do not suffice
		case m == 0:
			if empty++; empty >= maxEmptyReads {
				return io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
	return nil
}

var errBadRead = errors.New("gearman: reader returned an invalid count")

// makeRoom moves the unread bytes to the front of the buffer, growing it
// (to at most limit, at least n) when n bytes would not fit.
func (r *Reader) makeRoom(n, limit int) {
	unread := r.w - r.r
	if n <= len(r.buf) {
		copy(r.buf, r.buf[r.r:r.w])
		r.r, r.w = 0, unread
		return
	}
	size := min(2*len(r.buf), limit)
	size = max(size, n)
	nb := make([]byte, size)
	copy(nb, r.buf[r.r:r.w])
	r.buf, r.r, r.w = nb, 0, unread
}

// noEOF turns io.EOF into io.ErrUnexpectedEOF: the caller is inside a frame.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
