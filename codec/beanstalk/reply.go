package beanstalk

import (
	"fmt"
	"io"
	"math"
)

// AppendTo appends the reply's exact wire form, as beanstalkd writes it, to
// dst and returns the extended slice: its line and, for RESERVED, FOUND and
// OK, its body and "\r\n". It appends nothing for an invalid Kind. It does
// not check the tube name of USING.
func (r *Reply) AppendTo(dst []byte) []byte {
	if !r.Kind.valid() {
		return dst
	}
	dst = r.appendLine(dst)
	if r.Kind.HasBody() {
		dst = append(append(dst, r.Body...), "\r\n"...)
	}
	return dst
}

// AppendLine appends the reply's line with its "\r\n" and, unlike
// AppendTo, not its body, for a server that writes a large body from where
// it lies (writev): the body and "\r\n" follow it on the wire. It appends
// nothing for an invalid Kind.
func (r *Reply) AppendLine(dst []byte) []byte {
	if !r.Kind.valid() {
		return dst
	}
	return r.appendLine(dst)
}

// appendLine appends the reply's line, with its "\r\n", but not its body.
func (r *Reply) appendLine(dst []byte) []byte {
	dst = append(dst, replyTokens[r.Kind]...)
	switch r.Kind {
	case Inserted, BuriedID:
		dst = appendArgs(dst, r.ID)
	case Watching, KickedCount:
		dst = appendArgs(dst, r.Count)
	case Using:
		dst = append(append(dst, ' '), r.Tube...)
	case Reserved, Found:
		dst = appendArgs(dst, r.ID, uint64(len(r.Body)))
	case OK:
		dst = appendArgs(dst, uint64(len(r.Body)))
	}
	return append(dst, "\r\n"...)
}

// ReplyReader decodes the replies a beanstalkd server sends: the client
// side, for a gateway talking to real servers. It is not safe for
// concurrent use.
type ReplyReader struct {
	in    input
	lim   Limits
	reply Reply
	err   error // sticky fatal error
}

// NewReplyReader returns a ReplyReader of the replies in rd, enforcing lim
// (zero fields take their defaults).
func NewReplyReader(rd io.Reader, lim Limits) *ReplyReader {
	lim = lim.withDefaults()
	return &ReplyReader{in: newInput(rd, lim.MaxLine), lim: lim}
}

// Limits returns the limits r enforces, defaults filled in.
func (r *ReplyReader) Limits() Limits { return r.lim }

// Buffered returns the number of bytes read from the connection but not yet
// decoded.
func (r *ReplyReader) Buffered() int { return r.in.w - r.in.r }

// ReadReply decodes the next reply, including the body of RESERVED, FOUND
// and OK. Error replies (BAD_FORMAT, NOT_FOUND, ...) are replies, not
// errors.
//
// The returned Reply is r's own and aliases r's buffer: it, its Tube and
// its Body are valid only until the next call to ReadReply.
//
// A *ReplyTooBigError means a body over the limit was skipped and the
// stream is in sync: handle it and call ReadReply again. Any other error is
// fatal and returned again by every later call: a *ProtocolError for bytes
// that are not a reply (the line as beanstalkd formats it: single spaces,
// decimal numbers, a valid tube name, a body ending in "\r\n"), io.EOF when
// the input ends cleanly between replies, else the read error wrapped with
// %w.
func (r *ReplyReader) ReadReply() (*Reply, error) {
	if r.err != nil {
		return nil, r.err
	}
	line, err := r.in.readLine(r.lim.MaxLine, false)
	if err == errLong {
		return nil, r.fail(&ProtocolError{Reason: "line longer than the limit"})
	}
	if err != nil {
		return nil, r.fail(err)
	}
	p := &r.reply
	*p = Reply{}
	size, pe := parseReply(p, line)
	if pe != nil {
		return nil, r.fail(pe)
	}
	if !p.Kind.HasBody() {
		return p, nil
	}
	limit := r.lim.MaxJobSize
	if p.Kind == OK {
		limit = r.lim.MaxYAMLSize
	}
	if size > uint64(limit) {
		if err := r.in.discard(size + 2); err != nil {
			return nil, r.fail(err)
		}
		return nil, &ReplyTooBigError{Kind: p.Kind, ID: p.ID, Size: size, Limit: limit}
	}
	body, err := r.in.readFull(int(size) + 2)
	if err != nil {
		return nil, r.fail(err)
	}
	if body[size] != '\r' || body[size+1] != '\n' {
		// line may be overwritten by now: rebuild it.
		p.Body = body[:size]
		l := p.appendLine(nil)
		return nil, r.fail(newProtocolError(`body not followed by "\r\n"`, l[:len(l)-2]))
	}
	p.Body = body[:size:size]
	return p, nil
}

func (r *ReplyReader) fail(err error) error {
	if err != io.EOF {
		if _, ok := err.(*ProtocolError); !ok {
			err = fmt.Errorf("beanstalk: reading reply: %w", err)
		}
	}
	r.err = err
	return err
}

// parseReply decodes line into p. For the kinds with a body it returns the
// body size.
func parseReply(p *Reply, line []byte) (size uint64, pe *ProtocolError) {
	word, args := line, []byte(nil)
	for i, c := range line {
		if c == ' ' {
			word, args = line[:i], line[i:]
			break
		}
	}
	var ok bool
	switch string(word) {
	case "INSERTED":
		p.Kind = Inserted
		p.ID, args, ok = replyArg(args)
	case "BURIED":
		p.Kind, ok = Buried, true
		if len(args) > 0 {
			p.Kind = BuriedID
			p.ID, args, ok = replyArg(args)
		}
	case "RESERVED", "FOUND":
		p.Kind = Reserved
		if word[0] == 'F' {
			p.Kind = Found
		}
		if p.ID, args, ok = replyArg(args); ok {
			size, args, ok = replyArg(args)
		}
	case "OK":
		p.Kind = OK
		size, args, ok = replyArg(args)
	case "USING":
		p.Kind = Using
		if ok = len(args) > 1 && ValidName(args[1:]); ok {
			p.Tube, args = args[1:], nil
		}
	case "WATCHING":
		p.Kind = Watching
		p.Count, args, ok = replyArg(args)
	case "KICKED":
		p.Kind, ok = Kicked, true
		if len(args) > 0 {
			p.Kind = KickedCount
			p.Count, args, ok = replyArg(args)
		}
	default:
		p.Kind = bareReply(word)
		ok = p.Kind != 0
	}
	if p.Kind == 0 {
		return 0, newProtocolError("unknown reply", line)
	}
	if !ok || size > math.MaxUint32 {
		return 0, newProtocolError("malformed "+p.Kind.String()+" reply", line)
	}
	if len(args) > 0 {
		return 0, newProtocolError("unexpected text after the reply", line)
	}
	return size, nil
}

// replyArg reads one argument of a reply as beanstalkd prints it: a space
// and a decimal number that fits in 64 bits.
func replyArg(b []byte) (v uint64, rest []byte, ok bool) {
	if len(b) < 2 || b[0] != ' ' {
		return 0, b, false
	}
	v, n, ok := readDigits(b[1:])
	return v, b[1+n:], ok && n > 0
}

// bareReply returns the kind of a reply that is a word alone, or 0.
func bareReply(word []byte) ReplyKind {
	switch string(word) {
	case "DEADLINE_SOON":
		return DeadlineSoon
	case "TIMED_OUT":
		return TimedOut
	case "DELETED":
		return Deleted
	case "NOT_FOUND":
		return NotFound
	case "RELEASED":
		return Released
	case "TOUCHED":
		return Touched
	case "NOT_IGNORED":
		return NotIgnored
	case "PAUSED":
		return Paused
	case "EXPECTED_CRLF":
		return ExpectedCRLF
	case "JOB_TOO_BIG":
		return JobTooBig
	case "DRAINING":
		return Draining
	case "OUT_OF_MEMORY":
		return OutOfMemory
	case "INTERNAL_ERROR":
		return InternalError
	case "BAD_FORMAT":
		return BadFormat
	case "UNKNOWN_COMMAND":
		return UnknownCommand
	}
	return 0
}
