package gearman

import (
	"errors"
	"strconv"
)

// Code is the error code of an ERROR packet (its first argument), spelled as
// gearmand spells it: its gearman_return_t name without the "GEARMAN_"
// prefix.
type Code string

// Error codes gearmand puts in ERROR packets.
const (
	CodeInvalidMagic     Code = "INVALID_MAGIC"
	CodeInvalidCommand   Code = "INVALID_COMMAND"
	CodeInvalidPacket    Code = "INVALID_PACKET"
	CodeArgumentTooLarge Code = "ARGUMENT_TOO_LARGE"
	CodeQueueError       Code = "QUEUE_ERROR"
	CodeJobNotFound      Code = "JOB_NOT_FOUND"
	CodeUnknownOption    Code = "UNKNOWN_OPTION"
)

// Error texts (the second argument of ERROR), byte for byte as gearmand 2.0
// sends them, for engines that answer the way gearmand does.
const (
	// CodeInvalidMagic: a "\0RES" packet sent to the server.
	TextRequestMagicExpected = "Request magic expected"
	// CodeInvalidCommand: a type the server does not take (UNUSED,
	// SUBMIT_JOB_SCHED, ALL_YOURS, any response type).
	TextCommandNotExpected = "Command not expected"
	// CodeInvalidCommand: a type number outside the table. gearmand itself
	// closes the connection before it could send this.
	TextInvalidCommandExpected = "Invalid command expected"
	// CodeArgumentTooLarge: a unique ID over 64 bytes in SUBMIT_*.
	TextUniqueTooLarge = "Unique value too large"
	// CodeArgumentTooLarge: WORK_FAIL with a handle of 64 bytes or more.
	TextHandleTooLargeWorkFail = "Error occurred due to GEARMAND_JOB_HANDLE_SIZE being too small from snprintf"
	// CodeQueueError: the function's queue is at its maxqueue limit.
	TextJobQueueFull = "Job queue is full"
	// CodeJobNotFound: WORK_STATUS, WORK_COMPLETE or WORK_FAIL for a job the
	// connection does not hold.
	TextJobNotFoundWorkResult = "Job given in work result not found"
	// CodeJobNotFound: WORK_DATA or WORK_WARNING for an unknown job.
	TextJobDoesNotExist = "Job does not exist on server"
	// CodeJobNotFound: WORK_EXCEPTION for an unknown job.
	TextExceptionJobNotFound = "An exception was received for a job that does not exist"
	// CodeUnknownOption: OPTION_REQ other than "exceptions".
	TextUnknownOption = "Server does not recognize given option"
)

// Sentinel errors, one per kind of malformed input. A *ProtocolError wraps
// exactly one of them, so errors.Is(err, ErrTooLarge) works on what a Reader
// returns.
var (
	// ErrBadMagic: a frame starting with NUL is not "\0REQ" or "\0RES". The
	// stream is out of sync; fatal.
	ErrBadMagic = errors.New("gearman: bad magic")
	// ErrUnknownType: a packet type outside 1-4, 6-42. The body is skipped.
	ErrUnknownType = errors.New("gearman: unknown packet type")
	// ErrTooLarge: a packet body over Limits.MaxPacketSize. The body is
	// skipped.
	ErrTooLarge = errors.New("gearman: packet too large")
	// ErrTooFewArgs: a body with fewer NUL separators than its type needs.
	// The body is consumed.
	ErrTooFewArgs = errors.New("gearman: too few arguments")
	// ErrLineTooLong: an admin line over Limits.MaxLineSize. The rest of the
	// line is skipped.
	ErrLineTooLong = errors.New("gearman: admin line too long")
	// ErrHandleTooLong: a request carries a job handle over
	// Limits.MaxHandleSize. The packet is decoded and returned too.
	ErrHandleTooLong = errors.New("gearman: job handle too long")
	// ErrUniqueTooLong: a request carries a unique ID over
	// Limits.MaxUniqueSize. The packet is decoded and returned too.
	ErrUniqueTooLong = errors.New("gearman: unique ID too long")
	// ErrInvalidPacket: a packet handed to the encoder does not match its
	// type's layout (see Packet.Validate). Nothing was written.
	ErrInvalidPacket = errors.New("gearman: invalid packet")
)

// ProtocolError reports malformed input from the peer: what was wrong, how
// far the damage reaches, and what gearmand would answer.
//
// Fatal means the byte stream is out of sync and the connection must be
// closed (after an optional ERROR reply); the Reader then returns the same
// error forever. A non-fatal error left the Reader at the start of the next
// frame: the caller may reply (WriteError(e.Code, e.Text)) and keep reading,
// or close anyway: gearmand itself closes the connection on an unknown type,
// a short argument list or an over-long admin line, and sends nothing for a
// GET_STATUS handle over 63 bytes.
type ProtocolError struct {
	// Err is the sentinel saying what was wrong (ErrBadMagic, ...).
	Err error
	// Code and Text are the ERROR packet to answer with.
	Code Code
	Text string
	// Fatal is true when the stream cannot be resynchronised.
	Fatal bool
	// Magic and Type are those of the offending packet, when known.
	Magic Magic
	Type  Type
	// Size is the offending length: the declared body size (ErrTooLarge,
	// ErrUnknownType), the line length read so far (ErrLineTooLong), or the
	// argument length (ErrHandleTooLong, ErrUniqueTooLong).
	Size int64
	// Limit is the limit Size exceeded, if any.
	Limit int64
	// Args is the number of arguments found (ErrTooFewArgs).
	Args int
}

// Error describes the problem in one line.
func (e *ProtocolError) Error() string {
	b := make([]byte, 0, 96)
	b = append(b, e.Err.Error()...)
	if e.Type != 0 || e.Magic != 0 {
		b = append(b, " ("...)
		b = append(b, e.Magic.String()...)
		b = append(b, ' ')
		b = append(b, e.Type.String()...)
		b = append(b, ')')
	}
	switch e.Err {
	case ErrTooLarge, ErrLineTooLong, ErrHandleTooLong, ErrUniqueTooLong:
		b = append(b, ": "...)
		b = strconv.AppendInt(b, e.Size, 10)
		b = append(b, " bytes, limit "...)
		b = strconv.AppendInt(b, e.Limit, 10)
	case ErrTooFewArgs:
		b = append(b, ": "...)
		b = strconv.AppendInt(b, int64(e.Args), 10)
		b = append(b, " of "...)
		b = strconv.AppendInt(b, int64(e.Type.NumArgs()), 10)
	}
	switch {
	case e.Fatal:
		b = append(b, "; stream out of sync"...)
	case (e.Err == ErrTooLarge || e.Err == ErrUnknownType) && e.Size > 0:
		b = append(b, "; body of "...)
		b = strconv.AppendInt(b, e.Size, 10)
		b = append(b, " bytes skipped"...)
	}
	return string(b)
}

// Unwrap returns the sentinel, for errors.Is.
func (e *ProtocolError) Unwrap() error { return e.Err }

// IsFatal reports whether the connection that produced err must be closed:
// true for a fatal *ProtocolError and for any other non-nil error (I/O errors,
// io.EOF, io.ErrUnexpectedEOF), false for a non-fatal *ProtocolError and nil.
func IsFatal(err error) bool {
	if err == nil {
		return false
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return pe.Fatal
	}
	return true
}
