// Package beanstalk encodes and decodes the beanstalkd text protocol: the
// commands a client sends (with the body of put) and every reply a server
// sends, with beanstalkd 1.12/1.13's limits and error tokens.
package beanstalk

import "strconv"

// Verb names a command.
type Verb uint8

// Every command of beanstalkd 1.12/1.13.
const (
	Put Verb = iota + 1
	Use
	Reserve
	ReserveWithTimeout
	ReserveJob
	Delete
	Release
	Bury
	Touch
	Watch
	Ignore
	Peek
	PeekReady
	PeekDelayed
	PeekBuried
	Kick
	KickJob
	StatsJob
	StatsTube
	Stats
	ListTubes
	ListTubeUsed
	ListTubesWatched
	PauseTube
	Quit
)

// Command is one decoded command. Only the fields the verb takes are set;
// the others are zero.
//
// A Command returned by a Reader aliases the Reader's buffer: Tube and Body
// are valid only until the next call to the Reader. Copy what must be kept
// longer.
type Command struct {
	// Verb is the command.
	Verb Verb
	// Tube is the tube name of use, watch, ignore, stats-tube and pause-tube.
	Tube []byte
	// ID is the job id of reserve-job, delete, release, bury, touch, peek,
	// kick-job and stats-job.
	ID uint64
	// Pri is the priority of put, release and bury.
	Pri uint32
	// Delay is the delay in seconds of put, release and pause-tube.
	Delay uint32
	// TTR is the time-to-run in seconds of put, as sent (0 is not yet raised to 1).
	TTR uint32
	// Timeout is the timeout in seconds of reserve-with-timeout.
	Timeout uint32
	// Bound is the maximum number of jobs of kick.
	Bound uint32
	// Body is the job body of put, without its trailing "\r\n".
	Body []byte
	// BodyOwned says Body was allocated for this command alone, at exactly
	// its length, and nothing else refers to it: a receiver may keep it
	// instead of copying it. A Decoder with DirectMin sets it for the
	// bodies it reads into a buffer of their own.
	BodyOwned bool
}

// ReplyKind names a reply.
type ReplyKind uint8

// Every reply beanstalkd sends, including the generic errors.
const (
	Inserted       ReplyKind = iota + 1 // INSERTED <id>
	BuriedID                            // BURIED <id> (put, server out of memory)
	Buried                              // BURIED (release, bury)
	Reserved                            // RESERVED <id> <bytes> + body
	DeadlineSoon                        // DEADLINE_SOON
	TimedOut                            // TIMED_OUT
	Deleted                             // DELETED
	NotFound                            // NOT_FOUND
	Released                            // RELEASED
	Touched                             // TOUCHED
	Using                               // USING <tube>
	Watching                            // WATCHING <count>
	NotIgnored                          // NOT_IGNORED
	Found                               // FOUND <id> <bytes> + body
	KickedCount                         // KICKED <count> (kick)
	Kicked                              // KICKED (kick-job)
	OK                                  // OK <bytes> + YAML body
	Paused                              // PAUSED
	ExpectedCRLF                        // EXPECTED_CRLF
	JobTooBig                           // JOB_TOO_BIG
	Draining                            // DRAINING
	OutOfMemory                         // OUT_OF_MEMORY
	InternalError                       // INTERNAL_ERROR
	BadFormat                           // BAD_FORMAT
	UnknownCommand                      // UNKNOWN_COMMAND
)

// Reply is one reply. Only the fields the kind takes are set.
//
// A Reply returned by a ReplyReader aliases the reader's buffer: Tube and
// Body are valid only until the next call to it.
type Reply struct {
	// Kind is the reply.
	Kind ReplyKind
	// ID is the job id of INSERTED, BURIED <id>, RESERVED and FOUND.
	ID uint64
	// Count is the number of WATCHING and KICKED <count>.
	Count uint64
	// Tube is the tube name of USING.
	Tube []byte
	// Body is the job body of RESERVED and FOUND, or the YAML of OK,
	// without the trailing "\r\n".
	Body []byte
}

// AppendTo appends the command's wire form to dst and returns the extended
// slice: its line in canonical form (single spaces, plain decimals) and, for
// put, its body and "\r\n". It appends nothing for an invalid Verb. It does
// not check the tube name (see ValidName) or the body size: the server does.
func (c *Command) AppendTo(dst []byte) []byte {
	if !c.Verb.valid() {
		return dst
	}
	dst = c.appendLine(dst)
	if c.Verb == Put {
		dst = append(append(dst, c.Body...), "\r\n"...)
	}
	return dst
}

// appendLine appends the command's line, with its "\r\n", but not the body
// of put.
func (c *Command) appendLine(dst []byte) []byte {
	dst = append(dst, verbNames[c.Verb]...)
	switch c.Verb {
	case Put:
		dst = appendArgs(dst, uint64(c.Pri), uint64(c.Delay), uint64(c.TTR), uint64(len(c.Body)))
	case Use, Watch, Ignore, StatsTube:
		dst = append(append(dst, ' '), c.Tube...)
	case PauseTube:
		dst = append(append(dst, ' '), c.Tube...)
		dst = appendArgs(dst, uint64(c.Delay))
	case ReserveWithTimeout:
		dst = appendArgs(dst, uint64(c.Timeout))
	case Peek, ReserveJob, Delete, Touch, KickJob, StatsJob:
		dst = appendArgs(dst, c.ID)
	case Release:
		dst = appendArgs(dst, c.ID, uint64(c.Pri), uint64(c.Delay))
	case Bury:
		dst = appendArgs(dst, c.ID, uint64(c.Pri))
	case Kick:
		dst = appendArgs(dst, uint64(c.Bound))
	}
	return append(dst, "\r\n"...)
}

// appendArgs appends each of args preceded by a space.
func appendArgs(dst []byte, args ...uint64) []byte {
	for _, a := range args {
		dst = strconv.AppendUint(append(dst, ' '), a, 10)
	}
	return dst
}
