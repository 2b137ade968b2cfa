package beanstalk

import (
	"bytes"
	"fmt"
	"io"
	"math"
)

// Reader decodes the commands a client sends, with beanstalkd's limits and
// its exact rules of what is a bad command. It is not safe for concurrent
// use: it belongs to the connection's read loop.
type Reader struct {
	in  input
	lim Limits
	cmd Command
	err error // sticky fatal error
}

// NewReader returns a Reader of the commands in rd, enforcing lim (zero
// fields take their defaults).
func NewReader(rd io.Reader, lim Limits) *Reader {
	lim = lim.withDefaults()
	return &Reader{in: newInput(rd, lim.MaxLine), lim: lim}
}

// Limits returns the limits r enforces, defaults filled in.
func (r *Reader) Limits() Limits { return r.lim }

// Buffered returns the number of bytes read from the connection but not yet
// decoded. A server flushes its replies when this is 0, that is when the
// client has no more pipelined commands waiting.
func (r *Reader) Buffered() int { return r.in.w - r.in.r }

// ReadCommand decodes the next command, including the body of put.
//
// The returned Command is r's own and aliases r's buffer: it, its Tube and
// its Body are valid only until the next call to ReadCommand. The Command
// holds the values the client sent (kick's bound as beanstalkd reads it, cut
// to 32 bits); enforcing the server's rules on them (a ttr of 0 runs as 1,
// a pause of 0 as 1 s) is the engine's job.
//
// A *ClientError means the command was bad but consumed whole, exactly as
// beanstalkd consumes it: reply with its Kind and call ReadCommand again.
// Any other error is fatal and returned again by every later call: io.EOF
// when the input ends cleanly between commands, else the read error
// (io.ErrUnexpectedEOF inside a command) wrapped with %w.
//
// The rules are beanstalkd 1.13's; 1.12 differs only in reserve-with-timeout,
// which it read with strtol (accepting signs, taking no digits as 0, and
// waiting forever on a negative timeout). Two differences from both, whose
// behaviour there is a bug that desynchronizes the stream: a line holding a
// '\r' not followed by '\n' is BAD_FORMAT (beanstalkd stops reading lines
// until 224 bytes have arrived), and a too-long line whose "\r\n" straddles
// a 224-byte boundary ends there (beanstalkd misses that end and discards
// the next line too).
func (r *Reader) ReadCommand() (*Command, error) {
	if r.err != nil {
		return nil, r.err
	}
	line, err := r.in.readLine(r.lim.MaxLine, true)
	if err == errLong {
		return nil, errLineTooLong
	}
	if err != nil {
		return nil, r.fail(err)
	}
	c := &r.cmd
	*c = Command{}
	size, rest, ce := parseCommand(c, line)
	if ce != nil {
		return nil, ce
	}
	if c.Verb != Put {
		return c, nil
	}
	// beanstalkd checks the size before the rest of the line, and skips a
	// body it will not take, so that the stream stays in sync.
	if uint64(size) > uint64(r.lim.MaxJobSize) {
		if err := r.in.discard(uint64(size) + 2); err != nil {
			return nil, r.fail(err)
		}
		return nil, errJobTooBig
	}
	if len(rest) > 0 {
		return nil, errExtraArgs // the body stays in the stream, as in beanstalkd
	}
	body, err := r.in.readFull(int(size) + 2)
	if err != nil {
		return nil, r.fail(err)
	}
	// The two bytes after the body are consumed whatever they are.
	if body[size] != '\r' || body[size+1] != '\n' {
		return nil, errNoCRLF
	}
	c.Body = body[:size:size]
	return c, nil
}

func (r *Reader) fail(err error) error {
	if err != io.EOF {
		err = fmt.Errorf("beanstalk: reading command: %w", err)
	}
	r.err = err
	return err
}

// commandWords are beanstalkd's command prefixes in the order its which_cmd
// tries them: the first that begins the line wins. So "reservex" is reserve
// with trailing garbage (BAD_FORMAT, not UNKNOWN_COMMAND), "quitter" is
// quit, and "pause-tubefoo 1" pauses foo. Words of commands that take
// arguments end in a space, except pause-tube's.
var commandWords = [...]struct {
	word string
	verb Verb
}{
	{"put ", Put},
	{"peek ", Peek},
	{"peek-ready", PeekReady},
	{"peek-delayed", PeekDelayed},
	{"peek-buried", PeekBuried},
	{"reserve-with-timeout ", ReserveWithTimeout},
	{"reserve-job ", ReserveJob},
	{"reserve", Reserve},
	{"delete ", Delete},
	{"release ", Release},
	{"bury ", Bury},
	{"kick ", Kick},
	{"kick-job ", KickJob},
	{"touch ", Touch},
	{"stats-job ", StatsJob},
	{"stats-tube ", StatsTube},
	{"stats", Stats},
	{"use ", Use},
	{"watch ", Watch},
	{"ignore ", Ignore},
	{"list-tubes-watched", ListTubesWatched},
	{"list-tube-used", ListTubeUsed},
	{"list-tubes", ListTubes},
	{"quit", Quit},
	{"pause-tube", PauseTube},
}

// wordsByFirst indexes commandWords by first byte, keeping their order, so a
// line is compared with at most five words.
var wordsByFirst = func() (t [256][]uint8) {
	for i, w := range commandWords {
		t[w.word[0]] = append(t[w.word[0]], uint8(i))
	}
	return t
}()

// parseCommand decodes line into c. For put it returns the body size and
// what follows it on the line, for the caller to check in beanstalkd's
// order.
func parseCommand(c *Command, line []byte) (size uint32, rest []byte, ce *ClientError) {
	// beanstalkd rejects a NUL before anything else; a lone '\r' is our
	// addition (see ReadCommand).
	if bytes.IndexByte(line, 0) >= 0 || bytes.IndexByte(line, '\r') >= 0 {
		return 0, nil, errBadByte
	}
	if len(line) == 0 {
		return 0, nil, errUnknown
	}
	var args []byte
	for _, i := range wordsByFirst[line[0]] {
		if w := commandWords[i]; len(line) >= len(w.word) && string(line[:len(w.word)]) == w.word {
			c.Verb = w.verb
			args = line[len(w.word):]
			break
		}
	}
	var ok bool
	switch c.Verb {
	case 0:
		return 0, nil, errUnknown

	case Put:
		if c.Pri, args, ok = readU32(args); !ok {
			return 0, nil, errBadArgs
		}
		if c.Delay, args, ok = readU32(args); !ok {
			return 0, nil, errBadArgs
		}
		if c.TTR, args, ok = readU32(args); !ok {
			return 0, nil, errBadArgs
		}
		if size, args, ok = readU32(args); !ok {
			return 0, nil, errBadArgs
		}
		return size, args, nil

	case Peek, ReserveJob, Delete, Touch, KickJob, StatsJob:
		if c.ID, args, ok = readU64(args); !ok {
			return 0, nil, errBadArgs
		}

	case PeekReady, PeekDelayed, PeekBuried, Reserve, Stats, ListTubes, ListTubeUsed, ListTubesWatched:
		// no arguments

	case ReserveWithTimeout:
		// beanstalkd 1.13 reads a u32 up to INT_MAX and ignores the rest of
		// the line. (1.12 used strtol: signs, no digits at all as 0, and
		// negative timeouts waiting forever.)
		var t uint32
		if t, _, ok = readU32(args); !ok {
			return 0, nil, errBadArgs
		}
		if t > math.MaxInt32 {
			return 0, nil, errTimeout
		}
		c.Timeout, args = t, nil

	case Release:
		if c.ID, args, ok = readU64(args); !ok {
			return 0, nil, errBadArgs
		}
		if c.Pri, args, ok = readU32(args); !ok {
			return 0, nil, errBadArgs
		}
		if c.Delay, args, ok = readU32(args); !ok {
			return 0, nil, errBadArgs
		}

	case Bury:
		if c.ID, args, ok = readU64(args); !ok {
			return 0, nil, errBadArgs
		}
		if c.Pri, args, ok = readU32(args); !ok {
			return 0, nil, errBadArgs
		}

	case Kick:
		if c.Bound, ok = readKickBound(args); !ok {
			return 0, nil, errBadArgs
		}
		args = nil

	case Use, Watch, Ignore, StatsTube:
		// The rest of the line is the name: no spaces around it.
		if !ValidName(args) {
			return 0, nil, errBadName
		}
		c.Tube, args = args, nil

	case PauseTube:
		// Spaces, the longest run of name bytes, then the delay: so there
		// may be no space after the word at all.
		i := 0
		for i < len(args) && args[i] == ' ' {
			i++
		}
		n := nameRun(args[i:])
		if n == 0 {
			return 0, nil, errBadName
		}
		name := args[i : i+n : i+n]
		if c.Delay, args, ok = readU32(args[i+n:]); !ok {
			return 0, nil, errBadArgs
		}
		if len(args) > 0 {
			return 0, nil, errExtraArgs
		}
		if !ValidName(name) {
			return 0, nil, errBadName
		}
		c.Tube = name

	case Quit:
		args = nil // beanstalkd quits on any line starting "quit"
	}
	if len(args) > 0 {
		return 0, nil, errExtraArgs
	}
	return 0, nil, nil
}

// readU64 reads a number as beanstalkd's read_u64: any spaces, then one or
// more decimal digits (no sign; leading zeros are fine) whose value fits in
// 64 bits. It returns the bytes after the digits.
func readU64(b []byte) (v uint64, rest []byte, ok bool) {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	v, n, ok := readDigits(b[i:])
	return v, b[i+n:], ok && n > 0
}

// readU32 is readU64 for a value that must fit in 32 bits.
func readU32(b []byte) (uint32, []byte, bool) {
	v, rest, ok := readU64(b)
	if !ok || v > math.MaxUint32 {
		return 0, nil, false
	}
	return uint32(v), rest, true
}

// readDigits reads the leading decimal digits of b, all of them even past an
// overflow (as strtoumax does), and reports whether the value fits in 64
// bits.
func readDigits(b []byte) (v uint64, n int, ok bool) {
	ok = true
	for n < len(b) {
		d := b[n] - '0'
		if d > 9 {
			break
		}
		if v > (math.MaxUint64-uint64(d))/10 {
			ok = false
		}
		v = v*10 + uint64(d)
		n++
	}
	return v, n, ok
}

// readKickBound reads kick's bound as beanstalkd does, with C's strtoul into
// an unsigned int: any C white space, an optional sign, at least one digit,
// and whatever follows ignored; a value over 2^64-1 fails, a negative one
// wraps modulo 2^64, and the result is cut to its low 32 bits ("kick -1"
// kicks 4294967295 jobs, "kick 4294967296" none).
func readKickBound(b []byte) (uint32, bool) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i]-'\t' <= '\r'-'\t') {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	v, n, ok := readDigits(b[i:])
	if !ok || n == 0 {
		return 0, false
	}
	if neg {
		v = -v
	}
	return uint32(v), true
}
