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
	// DirectMin, when above 0, makes a put whose body has at least this
	// many bytes and has not all arrived get a buffer of its own at once:
	// Decode consumes the line and the part of the body it has, and the
	// rest goes into Room (read there straight from the socket, or copied
	// by later Decode calls), so a large body is never copied through the
	// caller's buffer and needs no room there. The put then comes with
	// BodyOwned set. beanstalkd reads bodies into the job the same way.
	DirectMin int

	lim     Limits
	cmd     Command
	skip    bool   // inside a line too long: dropping it through its "\r\n"
	discard uint64 // bytes of a body too big still to drop
	body    []byte // the body of the put d.cmd, filled outside b (DirectMin)
	got     int    // bytes of body in
}

// NewDecoder returns a Decoder enforcing lim (zero fields take their
// defaults).
func NewDecoder(lim Limits) *Decoder {
	return &Decoder{lim: lim.withDefaults()}
}

// Partial reports whether the decoder is in the middle of dropping a line
// too long or a body too big, or of a body of its own (DirectMin): a
// command has begun that is not finished.
func (d *Decoder) Partial() bool { return d.skip || d.discard > 0 || d.body != nil }

// Room returns the part of a put's body still to arrive when the decoder
// holds the body in a buffer of its own (DirectMin), else nil. A caller
// that reads into it reports how much it read with Filled; the body's
// "\r\n" and what follows go to the bytes offered to Decode.
func (d *Decoder) Room() []byte {
	if d.body == nil {
		return nil
	}
	return d.body[d.got:]
}

// Filled records that the first n bytes of Room were read into.
func (d *Decoder) Filled(n int) { d.got += n }

// Decode decodes the next command at the start of b and returns how many
// bytes of b it used. With a command, the Command is d's own and aliases b
// (Tube, Body; a Body with BodyOwned is the caller's to keep): valid
// until the next call and while b is unchanged. A
// *ClientError is a bad command consumed whole, as with ReadCommand.
// Neither, with n of 0, means b does not hold a whole command yet: call
// again with more bytes, starting with these. Neither with n > 0 means it
// dropped that many bytes of a line too long or a body too big, whose
// error comes once the rest has been dropped, or took them into a body of
// its own (DirectMin); the caller drops them too.
//
// Memory stays bounded as with a Reader: b never needs to hold more than
// one command line and one body of at most MaxJobSize, plus "\r\n".
func (d *Decoder) Decode(b []byte) (n int, c *Command, err error) {
	if d.body != nil {
		return d.finishBody(b)
	}
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
		if d.DirectMin > 0 && int(size) >= d.DirectMin {
			d.body = make([]byte, size)
			d.got = copy(d.body, b[n:])
			return n + d.got, nil, nil
		}
		return 0, nil, nil
	}
	body := b[n:end:end]
	if body[size] != '\r' || body[size+1] != '\n' {
		return end, nil, errNoCRLF
	}
	c.Body = body[:size:size]
	return end, c, nil
}

// finishBody goes on with the put whose body d holds: it copies into the
// body what b has of it and, once the body is complete, checks its
// "\r\n" as Decode does for a body in b.
func (d *Decoder) finishBody(b []byte) (n int, c *Command, err error) {
	n = copy(d.body[d.got:], b)
	d.got += n
	if d.got < len(d.body) || len(b)-n < 2 {
		return n, nil, nil // n may be 0: wait for more
	}
	body := d.body
	d.body, d.got = nil, 0
	if b[n] != '\r' || b[n+1] != '\n' {
		return n + 2, nil, errNoCRLF
	}
	c = &d.cmd
	c.Body, c.BodyOwned = body, true
	return n + 2, c, nil
}

// Need returns how many bytes the command at the start of b takes when it
// is a put whose line has arrived and whose body has not, so a caller can
// make room for it at once; otherwise 0 (also for a body DirectMin puts
// in a buffer of its own).
func (d *Decoder) Need(b []byte) int {
	if d.skip || d.discard > 0 || d.body != nil {
		return 0
	}
	i := bytes.Index(b, crlf)
	if i < 0 || i+2 > d.lim.MaxLine {
		return 0
	}
	var c Command
	size, rest, ce := parseCommand(&c, b[:i:i])
	if ce != nil || c.Verb != Put || uint64(size) > uint64(d.lim.MaxJobSize) || len(rest) > 0 ||
		d.DirectMin > 0 && int(size) >= d.DirectMin {
		return 0
	}
	return i + 2 + int(size) + 2
}
