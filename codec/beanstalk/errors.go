package beanstalk

import (
	"errors"
	"strconv"
)

// Errors come in two blast radii:
//
//   - *ClientError (from a Reader) and *ReplyTooBigError (from a
//     ReplyReader): the offending input was consumed whole and the stream is
//     still in sync. Answer (or handle) it and read on.
//   - anything else: fatal. I/O errors (wrapped with %w; a clean end of
//     input between commands is io.EOF itself, an end inside one is
//     io.ErrUnexpectedEOF) and *ProtocolError. The reader is unusable
//     afterwards and returns the same error again; close the connection.
//
// IsFatal tells the two apart.

// ClientError is a command that breaks the protocol. The Reader has consumed
// exactly what beanstalkd consumes for it (the line, and for put the body when
// beanstalkd skips or reads it), so the connection goes on: send a reply of
// Kind and read the next command.
//
// The Reader returns shared, preallocated values so that a flood of bad
// commands costs no allocation: compare them by Kind, never modify one.
type ClientError struct {
	// Kind is the reply to send: BadFormat, UnknownCommand, ExpectedCRLF or
	// JobTooBig.
	Kind ReplyKind
	// Reason says what was wrong, for logs.
	Reason string
}

// Error returns "beanstalk: " and the reply word and reason.
func (e *ClientError) Error() string {
	return "beanstalk: " + e.Kind.String() + ": " + e.Reason
}

// ProtocolError is a reply a ReplyReader cannot parse: the server does not
// speak the protocol (or the stream is out of sync), so nothing that follows
// can be trusted. Fatal.
type ProtocolError struct {
	// Reason says what was wrong.
	Reason string
	// Line is a copy of the start of the offending line (at most 64 bytes).
	Line []byte
}

// Error returns the reason and the quoted line.
func (e *ProtocolError) Error() string {
	return "beanstalk: bad reply: " + e.Reason + ": " + strconv.Quote(string(e.Line))
}

func newProtocolError(reason string, line []byte) *ProtocolError {
	if len(line) > 64 {
		line = line[:64]
	}
	return &ProtocolError{Reason: reason, Line: append([]byte(nil), line...)}
}

// ReplyTooBigError is a RESERVED, FOUND or OK reply whose body is larger than
// the ReplyReader's limit (Limits.MaxJobSize or Limits.MaxYAMLSize). The body
// was skipped, so the stream is in sync and the connection goes on; for
// RESERVED the job stays reserved by this connection, and ID says which one
// (to release or bury it).
type ReplyTooBigError struct {
	Kind  ReplyKind // Reserved, Found or OK
	ID    uint64    // the job id of RESERVED and FOUND
	Size  uint64    // the body length the server announced
	Limit int       // the limit it exceeds
}

// Error says which body exceeded which limit.
func (e *ReplyTooBigError) Error() string {
	return "beanstalk: " + e.Kind.String() + " body of " + strconv.FormatUint(e.Size, 10) +
		" bytes exceeds the limit of " + strconv.Itoa(e.Limit)
}

// IsFatal reports whether err ends the connection: false for nil, a
// *ClientError or a *ReplyTooBigError, true for anything else.
func IsFatal(err error) bool {
	if err == nil {
		return false
	}
	var ce *ClientError
	var tb *ReplyTooBigError
	return !errors.As(err, &ce) && !errors.As(err, &tb)
}

// The client errors a Reader returns, allocated once.
var (
	errLineTooLong = &ClientError{BadFormat, "command line longer than the limit"}
	errBadByte     = &ClientError{BadFormat, "NUL or CR byte in command line"}
	errUnknown     = &ClientError{UnknownCommand, "unknown command"}
	errBadArgs     = &ClientError{BadFormat, "malformed or missing argument"}
	errExtraArgs   = &ClientError{BadFormat, "unexpected text after the arguments"}
	errBadName     = &ClientError{BadFormat, "invalid tube name"}
	errTimeout     = &ClientError{BadFormat, "timeout over 2147483647"}
	errJobTooBig   = &ClientError{JobTooBig, "job body larger than the maximum job size"}
	errNoCRLF      = &ClientError{ExpectedCRLF, `job body not followed by "\r\n"`}
)
