package main

import (
	"bytes"
	"fmt"
	"math"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// bsReplies parses the replies the generator's event loop needs (INSERTED,
// RESERVED, DELETED, TIMED_OUT) from bytes already read, without
// allocating: a RESERVED body is passed over, never copied. Any other
// reply, or bytes that are not one, is an error that ends the run: the
// generator's commands have only these answers from a working server.
type bsReplies struct {
	in   []byte // in[r:end] is read but not parsed; read more into in[end:]
	r    int
	end  int
	skip int    // bytes of a RESERVED body still to pass over
	crlf bool   // the "\r\n" after a RESERVED body is still to check
	held uint64 // the id of the RESERVED whose body is being passed over
}

// bsReplyHandler takes one parsed reply: its kind, with the job id of
// INSERTED and RESERVED.
type bsReplyHandler interface {
	reply(kind wire.ReplyKind, id uint64) error
}

// parse hands every whole reply in in[r:end] to h, then moves what is
// left (part of a line) to the front of in.
func (p *bsReplies) parse(h bsReplyHandler) error {
	for {
		if p.skip > 0 {
			k := min(p.skip, p.end-p.r)
			p.r += k
			p.skip -= k
			if p.skip > 0 {
				break
			}
		}
		if p.crlf {
			if p.end-p.r < 2 {
				break
			}
			if p.in[p.r] != '\r' || p.in[p.r+1] != '\n' {
				return fmt.Errorf(`RESERVED %d: body not followed by "\r\n"`, p.held)
			}
			p.r += 2
			p.crlf = false
			if err := h.reply(wire.Reserved, p.held); err != nil {
				return err
			}
			continue
		}
		i := bytes.Index(p.in[p.r:p.end], []byte("\r\n"))
		if i < 0 {
			if p.end-p.r >= wire.DefaultMaxLine {
				return fmt.Errorf("reply line longer than %d bytes: %.40q", wire.DefaultMaxLine, p.in[p.r:p.end])
			}
			break
		}
		line := p.in[p.r : p.r+i]
		p.r += i + 2
		kind, id, size, err := parseBsReply(line)
		if err != nil {
			return err
		}
		if kind == wire.Reserved {
			p.skip, p.crlf, p.held = size, true, id
			continue
		}
		if err := h.reply(kind, id); err != nil {
			return err
		}
	}
	p.end = copy(p.in, p.in[p.r:p.end])
	p.r = 0
	return nil
}

// maxBsReplyBody bounds the body size a RESERVED line may announce; the
// body is passed over, so this only rejects nonsense.
const maxBsReplyBody = 1<<31 - 1 // fits an int on 32-bit platforms too

// parseBsReply decodes one reply line (without its "\r\n").
func parseBsReply(line []byte) (kind wire.ReplyKind, id uint64, size int, err error) {
	switch {
	case bytes.HasPrefix(line, []byte("INSERTED ")):
		var rest []byte
		if id, rest = replyNumber(line[len("INSERTED "):]); len(rest) == 0 && id > 0 {
			return wire.Inserted, id, 0, nil
		}
	case bytes.HasPrefix(line, []byte("RESERVED ")):
		var rest []byte
		id, rest = replyNumber(line[len("RESERVED "):])
		if len(rest) > 1 && rest[0] == ' ' && id > 0 {
			n, tail := replyNumber(rest[1:])
			if len(tail) == 0 && n <= maxBsReplyBody {
				return wire.Reserved, id, int(n), nil
			}
		}
	case string(line) == "DELETED":
		return wire.Deleted, 0, 0, nil
	case string(line) == "TIMED_OUT":
		return wire.TimedOut, 0, 0, nil
	}
	return 0, 0, 0, fmt.Errorf("unexpected reply %.60q", line)
}

// replyNumber reads the decimal number at the start of b, returning it and
// what follows; no digits, or a number over 64 bits, return b whole
// (never a valid end).
func replyNumber(b []byte) (uint64, []byte) {
	var v uint64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, b // overflow
		}
		v = v*10 + d
	}
	if i == 0 {
		return 0, b
	}
	return v, b[i:]
}
