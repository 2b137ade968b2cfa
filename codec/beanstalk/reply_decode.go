package beanstalk

import "bytes"

// DecodeReply decodes the first reply in b, for a client that reads its
// sockets itself (an event loop) and must never wait inside a decode; it
// follows ReplyReader's rules. It returns how many bytes of b the reply
// took:
//
//   - n > 0 and a nil error: p holds the reply, aliasing b (Tube, Body)
//     until b changes;
//   - n > 0 and a *ReplyTooBigError: the line of a reply whose body is over
//     the limit; the caller drops those n bytes and then the next
//     err.Size+2 bytes (the body and its "\r\n") as they arrive, and the
//     stream is in sync again;
//   - n == 0 and a nil error: b does not hold a whole reply yet;
//   - any other error (a *ProtocolError) is fatal.
//
// lim must have its defaults filled in (ReplyReader.Limits, or
// Limits.WithDefaults).
func DecodeReply(b []byte, lim Limits, p *Reply) (n int, err error) {
	i := bytes.Index(b, crlf)
	if i < 0 {
		if len(b) >= lim.MaxLine {
			return 0, &ProtocolError{Reason: "line longer than the limit"}
		}
		return 0, nil
	}
	if i+2 > lim.MaxLine {
		return 0, &ProtocolError{Reason: "line longer than the limit"}
	}
	*p = Reply{}
	size, pe := parseReply(p, b[:i:i])
	if pe != nil {
		return 0, pe
	}
	n = i + 2
	if !p.Kind.HasBody() {
		return n, nil
	}
	limit := lim.MaxJobSize
	if p.Kind == OK {
		limit = lim.MaxYAMLSize
	}
	if size > uint64(limit) {
		return n, &ReplyTooBigError{Kind: p.Kind, ID: p.ID, Size: size, Limit: limit}
	}
	end := n + int(size) + 2
	if len(b) < end {
		return 0, nil
	}
	if b[end-2] != '\r' || b[end-1] != '\n' {
		return 0, newProtocolError(`body not followed by "\r\n"`, b[:i])
	}
	p.Body = b[n : end-2 : end-2]
	return end, nil
}

// WithDefaults returns l with its zero fields set to their defaults.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }
