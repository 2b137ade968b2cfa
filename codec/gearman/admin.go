package gearman

// Admin replies, byte for byte as gearmand sends them (checked against
// gearmand 1.1.20 and the 2.0 source, libgearman-server/text.cc). Note the
// mixed line endings: status-like listings end in ".\n", OK/ERR in "\r\n",
// and getpid/version/verbose answer "OK <value>\n".
const (
	// AdminOK answers maxqueue, cancel job, create/drop function.
	AdminOK = "OK\r\n"
	// AdminEnd ends the listing of workers, status, prioritystatus, show
	// jobs and show unique jobs.
	AdminEnd = ".\n"
	// AdminErrUnknownJob answers "cancel job" for an unknown handle.
	AdminErrUnknownJob = "ERR UNKNOWN_JOB\r\n"
	// AdminErrUnknownShowArguments answers "show" with other arguments.
	AdminErrUnknownShowArguments = "ERR UNKNOWN_SHOW_ARGUMENTS\r\n"
	// AdminErrUnknownError is gearmand's reply when it has nothing else to
	// say.
	AdminErrUnknownError = "ERR UNKNOWN_ERROR\r\n"
)

// MaxAdminFields is the most words gearmand accepts in an admin line; it
// closes the connection on a line with more (a trailing space counts as
// starting an empty word).
const MaxAdminFields = 5

// AppendAdminUnknownCommand appends gearmand's reply to an unknown admin
// command. gearmand glues the command word to its message with no separator:
// "foo" gets "ERR UNKNOWN_COMMAND Unknown+server+commandfoo\r\n", and an
// empty line gets the message alone.
func AppendAdminUnknownCommand(dst, command []byte) []byte {
	dst = append(dst, "ERR UNKNOWN_COMMAND Unknown+server+command"...)
	dst = append(dst, command...)
	return append(dst, "\r\n"...)
}

// AppendAdminInvalidArguments appends gearmand's reply to an admin command
// missing arguments (maxqueue with none, create/drop without "function
// NAME"), e.g. "ERR INVALID_ARGUMENTS
// An+incomplete+set+of+arguments+was+sent+to+this+command+maxqueue\r\n".
// command is echoed as the client typed it.
func AppendAdminInvalidArguments(dst, command []byte) []byte {
	dst = append(dst, "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+"...)
	dst = append(dst, command...)
	return append(dst, "\r\n"...)
}

// AppendAdminFields splits an admin line (Frame.Text) into words the way
// gearmand does and appends them to dst; given a dst with capacity for
// MaxAdminFields+1 words it does not allocate. The words alias line.
//
// Only spaces separate words, and a run of them counts as one separator.
// The first word starts at the first byte, so a leading space makes it
// empty, and a trailing run of spaces starts one more, empty, word:
// "show jobs " is three words, which is why gearmand answers it with
// ERR UNKNOWN_SHOW_ARGUMENTS. An empty line is one empty word. Tabs and a
// second "\r" are part of words. Commands are case-insensitive
// (bytes.EqualFold).
func AppendAdminFields(dst [][]byte, line []byte) [][]byte {
	start := 0
	for i := 0; i < len(line); i++ {
		if line[i] != ' ' {
			continue
		}
		dst = append(dst, line[start:i:i])
		for i+1 < len(line) && line[i+1] == ' ' {
			i++
		}
		start = i + 1
	}
	return append(dst, line[start:len(line):len(line)])
}
