// Package gearman encodes and decodes the Gearman protocol: binary packets
// ("\0REQ"/"\0RES" framed) and the admin text lines that share the same port.
//
// One Packet type serves all 42 packet types rather than one Go type per
// packet: every Gearman packet has the same shape (magic, type, NUL-separated
// arguments whose last one is sized by the packet length), so a single struct
// decodes with no per-type allocation or dispatch, passes through a gateway
// untouched, and re-encodes byte for byte. The per-type knowledge (how many
// arguments, what each one means) lives in a table and in typed accessors.
//
// Reading: a Reader returns one Frame per call, a packet or an admin line,
// aliasing its buffer until the next call, with no allocation in steady
// state. Malformed input comes back as a *ProtocolError that says whether
// the connection can go on (Fatal), which sentinel it is (errors.Is), and
// the gearmand ERROR code and text to answer with. Limits bound every size
// before any memory is committed to it.
//
// Writing: a Writer buffers packets, ERROR replies and admin text until
// Flush; AppendPacket and the AppendTo methods encode into a caller's slice.
//
// Behaviour follows gearmand (1.1.20 as run, 2.0 as read), including its
// quirks where clients can see them; the comments say which.
package gearman

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Magic tells a request ("\0REQ", sent to the server) from a response
// ("\0RES", sent by the server).
type Magic uint8

// The two magic codes.
const (
	Req Magic = iota + 1 // "\0REQ": client or worker to server
	Res                  // "\0RES": server to client or worker
)

// Type is a binary packet type, as numbered on the wire.
type Type uint32

// Packet types 1–36 of the protocol document and gearmand 2.0's 37–42.
// Type 5 is unused.
const (
	CanDo                     Type = 1
	CantDo                    Type = 2
	ResetAbilities            Type = 3
	PreSleep                  Type = 4
	Noop                      Type = 6
	SubmitJob                 Type = 7
	JobCreated                Type = 8
	GrabJob                   Type = 9
	NoJob                     Type = 10
	JobAssign                 Type = 11
	WorkStatus                Type = 12
	WorkComplete              Type = 13
	WorkFail                  Type = 14
	GetStatus                 Type = 15
	EchoReq                   Type = 16
	EchoRes                   Type = 17
	SubmitJobBg               Type = 18
	Error                     Type = 19
	StatusRes                 Type = 20
	SubmitJobHigh             Type = 21
	SetClientID               Type = 22
	CanDoTimeout              Type = 23
	AllYours                  Type = 24
	WorkException             Type = 25
	OptionReq                 Type = 26
	OptionRes                 Type = 27
	WorkData                  Type = 28
	WorkWarning               Type = 29
	GrabJobUniq               Type = 30
	JobAssignUniq             Type = 31
	SubmitJobHighBg           Type = 32
	SubmitJobLow              Type = 33
	SubmitJobLowBg            Type = 34
	SubmitJobSched            Type = 35
	SubmitJobEpoch            Type = 36
	SubmitReduceJob           Type = 37
	SubmitReduceJobBackground Type = 38
	GrabJobAll                Type = 39
	JobAssignAll              Type = 40
	GetStatusUnique           Type = 41
	StatusResUnique           Type = 42
)

// Packet is one binary packet.
//
// A Packet returned by a Reader aliases the Reader's buffer: Args (and the
// slice holding them) are valid only until the next call to the Reader.
// Copy what must be kept longer (Clone).
type Packet struct {
	Magic Magic
	Type  Type
	// Args are the NUL-separated arguments, in wire order. The last argument
	// is delimited by the packet length and may itself contain NUL bytes.
	Args [][]byte
}

// HeaderSize is the size of a binary packet header: magic, type and body
// length, four bytes each.
const HeaderSize = 12

// Arg returns argument i, or nil when the packet has no argument i.
func (p *Packet) Arg(i int) []byte {
	if i < 0 || i >= len(p.Args) {
		return nil
	}
	return p.Args[i]
}

// Field returns the argument meaning f for this packet's type, or nil when
// the type has no such argument. It never allocates.
func (p *Packet) Field(f Field) []byte { return p.Arg(p.Type.ArgIndex(f)) }

// Handle returns the job handle (JOB_CREATED, JOB_ASSIGN*, WORK_*,
// GET_STATUS, STATUS_RES), or nil.
func (p *Packet) Handle() []byte { return p.Field(FieldHandle) }

// Function returns the function name (CAN_DO*, CANT_DO, SUBMIT_*,
// JOB_ASSIGN*), or nil.
func (p *Packet) Function() []byte { return p.Field(FieldFunction) }

// Unique returns the unique ID (SUBMIT_*, JOB_ASSIGN_UNIQ, JOB_ASSIGN_ALL,
// GET_STATUS_UNIQUE, STATUS_RES_UNIQUE), or nil.
func (p *Packet) Unique() []byte { return p.Field(FieldUnique) }

// Data returns the opaque payload: the workload of SUBMIT_* and JOB_ASSIGN*,
// the result of WORK_COMPLETE/WORK_DATA/WORK_WARNING/WORK_EXCEPTION, or the
// echo data. Nil when the type has none.
func (p *Packet) Data() []byte { return p.Field(FieldData) }

// Reducer returns the reducer name of SUBMIT_REDUCE_JOB* and
// JOB_ASSIGN_ALL, or nil.
func (p *Packet) Reducer() []byte { return p.Field(FieldReducer) }

// Validate reports whether p can be encoded as a packet that decodes back to
// p: a valid magic and type, exactly Type.NumArgs() arguments, no NUL byte in
// any argument but the last, and a body that fits the 32-bit length field.
// The error wraps ErrInvalidPacket.
func (p *Packet) Validate() error {
	_, err := validate(p.Magic, p.Type, p.Args)
	return err
}

// validate checks a packet for encoding and returns its body size.
func validate(m Magic, t Type, args [][]byte) (int, error) {
	if !m.Valid() {
		return 0, invalidPacket(m, t, "bad magic")
	}
	if !t.Valid() {
		return 0, invalidPacket(m, t, "unknown type")
	}
	if len(args) != int(types[t].n) {
		return 0, invalidPacket(m, t, "takes "+strconv.Itoa(int(types[t].n))+" arguments, got "+strconv.Itoa(len(args)))
	}
	size := 0
	for i, a := range args {
		size += len(a) + 1
		if i < len(args)-1 && bytes.IndexByte(a, 0) >= 0 {
			return 0, invalidPacket(m, t, "NUL byte in argument "+strconv.Itoa(i)+" ("+t.ArgField(i).String()+")")
		}
	}
	if size > 0 {
		size-- // no separator after the last argument
	}
	if uint64(size) > math.MaxUint32 {
		return 0, invalidPacket(m, t, "body over 4 GiB")
	}
	return size, nil
}

func invalidPacket(m Magic, t Type, why string) error {
	return fmt.Errorf("%w: %s %s: %s", ErrInvalidPacket, m, t, why)
}

// AppendTo appends the wire encoding of p to dst and returns the extended
// slice. It does not validate p; see Validate.
func (p *Packet) AppendTo(dst []byte) []byte {
	return AppendPacket(dst, p.Magic, p.Type, p.Args...)
}

// AppendPacket appends the wire encoding of one packet to dst and returns the
// extended slice: the header, then the arguments joined by NUL, with the body
// length back-filled. It allocates only if dst must grow. It does not
// validate; WritePacket and Packet.Validate do.
func AppendPacket(dst []byte, m Magic, t Type, args ...[]byte) []byte {
	start := len(dst)
	b0, b1, b2, b3 := magicBytes(m)
	dst = append(dst, b0, b1, b2, b3,
		byte(t>>24), byte(t>>16), byte(t>>8), byte(t),
		0, 0, 0, 0)
	for i, a := range args {
		if i > 0 {
			dst = append(dst, 0)
		}
		dst = append(dst, a...)
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-HeaderSize))
	return dst
}

// MarshalBinary returns the wire encoding of p, after Validate.
func (p *Packet) MarshalBinary() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p.AppendTo(nil), nil
}

// UnmarshalBinary decodes data, which must hold exactly one binary packet
// (header and body), into p. Args alias data and reuse p.Args' backing array
// when it is large enough. Only the framing is checked (magic, type, length,
// argument count); the handle, unique and size limits are the Reader's. A
// packet type without arguments ignores its body, as gearmand does.
func (p *Packet) UnmarshalBinary(data []byte) error {
	if len(data) < HeaderSize {
		return fmt.Errorf("gearman: %d bytes is shorter than a packet header: %w", len(data), io.ErrUnexpectedEOF)
	}
	m := parseMagic(data)
	if m == 0 {
		return badMagic()
	}
	t := Type(binary.BigEndian.Uint32(data[4:]))
	size := int64(binary.BigEndian.Uint32(data[8:]))
	if !t.Valid() {
		return unknownType(m, t, size)
	}
	if body := int64(len(data) - HeaderSize); size != body {
		if size > body {
			return fmt.Errorf("gearman: %s %s: body is %d bytes, header says %d: %w", m, t, body, size, io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("gearman: %s %s: %d bytes after the packet", m, t, body-size)
	}
	args := p.Args[:0]
	if cap(args) < int(types[t].n) {
		args = make([][]byte, 0, types[t].n)
	}
	args, err := splitArgs(m, t, data[HeaderSize:], args)
	if err != nil {
		return err
	}
	p.Magic, p.Type, p.Args = m, t, args
	return nil
}

// splitArgs splits body into the arguments of type t, appending them to dst,
// which must have room for all of them so that nothing allocates. Each
// argument is capped at its own length, so appending to one cannot overwrite
// the next.
func splitArgs(m Magic, t Type, body []byte, dst [][]byte) ([][]byte, *ProtocolError) {
	n := int(types[t].n)
	if n == 0 {
		// gearmand reads and ignores the body of a packet that takes no
		// arguments (GRAB_JOB with junk still gets NO_JOB), and so does this.
		return dst, nil
	}
	for i := 0; i < n-1; i++ {
		j := bytes.IndexByte(body, 0)
		if j < 0 {
			return dst, &ProtocolError{Err: ErrTooFewArgs, Code: CodeInvalidPacket, Text: "Too few arguments",
				Magic: m, Type: t, Args: i + 1}
		}
		dst = append(dst, body[:j:j])
		body = body[j+1:]
	}
	dst = append(dst, body)
	return dst[:len(dst):len(dst)], nil
}

func badMagic() *ProtocolError {
	// gearmand closes the connection without a reply; the text is ours.
	return &ProtocolError{Err: ErrBadMagic, Code: CodeInvalidMagic, Text: "Invalid magic value", Fatal: true}
}

func unknownType(m Magic, t Type, size int64) *ProtocolError {
	text := TextInvalidCommandExpected
	if t == 5 {
		text = TextCommandNotExpected // what gearmand answers for UNUSED
	}
	return &ProtocolError{Err: ErrUnknownType, Code: CodeInvalidCommand, Text: text, Magic: m, Type: t, Size: size}
}

// Clone returns a deep copy of p that does not alias any Reader buffer. It
// makes two allocations: the argument slice and one buffer for all bytes.
func (p *Packet) Clone() Packet {
	c := Packet{Magic: p.Magic, Type: p.Type}
	if p.Args == nil {
		return c
	}
	n := 0
	for _, a := range p.Args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	c.Args = make([][]byte, len(p.Args))
	for i, a := range p.Args {
		start := len(buf)
		buf = append(buf, a...)
		c.Args[i] = buf[start:len(buf):len(buf)]
	}
	return c
}

// String formats p for logs and tests, e.g.
// `REQ SUBMIT_JOB ["reverse" "" "test"]`. Long arguments are shortened.
func (p *Packet) String() string {
	b := make([]byte, 0, 64)
	b = append(b, p.Magic.String()...)
	b = append(b, ' ')
	b = append(b, p.Type.String()...)
	b = append(b, " ["...)
	for i, a := range p.Args {
		if i > 0 {
			b = append(b, ' ')
		}
		const max = 64
		if len(a) > max {
			b = strconv.AppendQuote(b, string(a[:max]))
			b = append(b, "..."...)
			b = strconv.AppendInt(b, int64(len(a)), 10)
			b = append(b, 'B')
			continue
		}
		b = strconv.AppendQuote(b, string(a))
	}
	b = append(b, ']')
	return string(b)
}
