package beanstalk

import "bytes"

// Decoder decodes commands from bytes the caller has already read, for a
// server that reads its sockets itself (an event loop) and must never wait
// inside a decode. It follows a Reader's rules exactly, command for
// command and error for error; only the reading differs: the caller keeps
// the bytes and offers them to Decode again once more have arrived.
//
// It is not safe for concurrent use: one per connection.
type Decoder struct {
	lim     Limits
	cmd     Command
	skip    bool   // inside a line too long: dropping it through its "\r\n"
	discard uint64 // bytes of a body too big still to drop
}

// NewDecoder returns a Decoder enforcing lim (zero fields take their
// defaults).
func NewDecoder(lim Limits) *Decoder {
	return &Decoder{lim: lim.withDefaults()}
}

// Partial reports whether the decoder is in the middle of dropping a line
// too long or a body too big: a command has begun that is not finished.
func (d *Decoder) Partial() bool { return d.skip || d.discard > 0 }

// Decode decodes the next command at the start of b and returns how many
// bytes of b it used. With a command, the Command is d's own and aliases b
// (Tube, Body): valid until the next call and while b is unchanged. A
// *ClientError is a bad command consumed whole, as with ReadCommand.
// Neither, with n of 0, means b does not hold a whole command yet: call
// again with more bytes, starting with these. Neither with n > 0 means it
// dropped that many bytes of a line too long or a body too big, whose
// error comes once the rest has been dropped; the caller drops them too.
//
// Memory stays bounded as with a Reader: b never needs to hold more than
// one command line and one body of at most MaxJobSize, plus "\r\n".
func (d *Decoder) Decode(b []byte) (n int, c *Command, err error) {
	if d.discard > 0 {
		k := min(uint64(len(b)), d.discard)
		d.discard -= k
		if d.discard == 0 {
			return int(k), nil, errJobTooBig
		}
		return int(k), nil, nil
	}
	if d.skip {
		if i := bytes.Index(b, crlf); i >= 0 {
			d.skip = false
			return i + 2, nil, errLineTooLong
		}
		// Hold back a trailing '\r': its '\n' may come with the next read.
		if k := len(b); k > 0 && b[k-1] == '\r' {
			return k - 1, nil, nil
		}
		return len(b), nil, nil
	}
	max := d.lim.MaxLine
	i := bytes.Index(b, crlf)
	if i < 0 {
		if len(b) >= max {
			d.skip = true
			return d.Decode(b)
		}
		return 0, nil, nil
	}
	n = i + 2
	if n > max {
		return n, nil, errLineTooLong
	}
	c = &d.cmd
	*c = Command{}
	size, rest, ce := parseCommand(c, b[:i:i])
	if ce != nil {
		return n, nil, ce
	}
	if c.Verb != Put {
		return n, c, nil
	}
	if uint64(size) > uint64(d.lim.MaxJobSize) {
		d.discard = uint64(size) + 2
		k, _, err := d.Decode(b[n:])
		return n + k, nil, err
	}
	if len(rest) > 0 {
		return n, nil, errExtraArgs
	}
	end := n + int(size) + 2
	if len(b) < end {
		return 0, nil, nil
	}
	body := b[n:end:end]
	if body[size] != '\r' || body[size+1] != '\n' {
		return end, nil, errNoCRLF
	}
	c.Body = body[:size:size]
	return end, c, nil
}

// Need returns how many bytes the command at the start of b takes when it
// is a put whose line has arrived and whose body has not, so a caller can
// make room for it at once; otherwise 0.
func (d *Decoder) Need(b []byte) int {
	if d.skip || d.discard > 0 {
		return 0
	}
	i := bytes.Index(b, crlf)
	if i < 0 || i+2 > d.lim.MaxLine {
		return 0
	}
	var c Command
	size, rest, ce := parseCommand(&c, b[:i:i])
	if ce != nil || c.Verb != Put || uint64(size) > uint64(d.lim.MaxJobSize) || len(rest) > 0 {
		return 0
	}
	return i + 2 + int(size) + 2
}
