package beanstalk

import "strconv"

// MaxNameLen is the longest tube name beanstalkd accepts, in bytes.
const MaxNameLen = 200

// nameChars marks the bytes a tube name may hold: letters, digits and
// "-+/;.$_()" (beanstalkd's NAME_CHARS). A table, not a switch, because the
// check runs on every byte of every tube name.
var nameChars = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range []byte("-+/;.$_()") {
		t[c] = true
	}
	return t
}()

// ValidName reports whether name is a tube name beanstalkd accepts: 1 to
// MaxNameLen bytes of [A-Za-z0-9-+/;.$_()], not starting with '-'.
func ValidName(name []byte) bool {
	if len(name) == 0 || len(name) > MaxNameLen || name[0] == '-' {
		return false
	}
	return nameRun(name) == len(name)
}

// nameRun returns the length of the longest prefix of b made of name bytes.
func nameRun(b []byte) int {
	for i, c := range b {
		if !nameChars[c] {
			return i
		}
	}
	return len(b)
}

// verbNames are the command words as sent on the wire, indexed by Verb.
var verbNames = [...]string{
	Put:                "put",
	Use:                "use",
	Reserve:            "reserve",
	ReserveWithTimeout: "reserve-with-timeout",
	ReserveJob:         "reserve-job",
	Delete:             "delete",
	Release:            "release",
	Bury:               "bury",
	Touch:              "touch",
	Watch:              "watch",
	Ignore:             "ignore",
	Peek:               "peek",
	PeekReady:          "peek-ready",
	PeekDelayed:        "peek-delayed",
	PeekBuried:         "peek-buried",
	Kick:               "kick",
	KickJob:            "kick-job",
	StatsJob:           "stats-job",
	StatsTube:          "stats-tube",
	Stats:              "stats",
	ListTubes:          "list-tubes",
	ListTubeUsed:       "list-tube-used",
	ListTubesWatched:   "list-tubes-watched",
	PauseTube:          "pause-tube",
	Quit:               "quit",
}

// String returns the command word, e.g. "reserve-with-timeout", or
// "Verb(n)" for a value that is not a Verb.
func (v Verb) String() string {
	if v.valid() {
		return verbNames[v]
	}
	return "Verb(" + strconv.Itoa(int(v)) + ")"
}

func (v Verb) valid() bool { return v >= Put && int(v) < len(verbNames) }

// replyTokens are the first words of the replies, indexed by ReplyKind.
var replyTokens = [...]string{
	Inserted:       "INSERTED",
	BuriedID:       "BURIED",
	Buried:         "BURIED",
	Reserved:       "RESERVED",
	DeadlineSoon:   "DEADLINE_SOON",
	TimedOut:       "TIMED_OUT",
	Deleted:        "DELETED",
	NotFound:       "NOT_FOUND",
	Released:       "RELEASED",
	Touched:        "TOUCHED",
	Using:          "USING",
	Watching:       "WATCHING",
	NotIgnored:     "NOT_IGNORED",
	Found:          "FOUND",
	KickedCount:    "KICKED",
	Kicked:         "KICKED",
	OK:             "OK",
	Paused:         "PAUSED",
	ExpectedCRLF:   "EXPECTED_CRLF",
	JobTooBig:      "JOB_TOO_BIG",
	Draining:       "DRAINING",
	OutOfMemory:    "OUT_OF_MEMORY",
	InternalError:  "INTERNAL_ERROR",
	BadFormat:      "BAD_FORMAT",
	UnknownCommand: "UNKNOWN_COMMAND",
}

// String returns the reply's first word, e.g. "NOT_FOUND" (BuriedID and
// Buried both give "BURIED", KickedCount and Kicked both "KICKED"), or
// "ReplyKind(n)" for a value that is not a ReplyKind.
func (k ReplyKind) String() string {
	if k.valid() {
		return replyTokens[k]
	}
	return "ReplyKind(" + strconv.Itoa(int(k)) + ")"
}

func (k ReplyKind) valid() bool { return k >= Inserted && int(k) < len(replyTokens) }

// HasBody reports whether a reply of kind k carries a body after its line:
// RESERVED, FOUND and OK.
func (k ReplyKind) HasBody() bool { return k == Reserved || k == Found || k == OK }
