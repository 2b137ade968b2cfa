package gearman

import "strconv"

// MaxArgs is the largest number of arguments any packet type has
// (SUBMIT_JOB_SCHED). A Reader keeps an array of this many argument slices so
// that decoding never allocates one.
const MaxArgs = 8

// Field names what an argument means. Type.ArgField and Packet.Field use it
// so that code asks for "the handle" instead of hard-coding an index that
// differs between packet types.
type Field uint8

// The argument meanings. FieldData is always the last argument of its
// packet; it is the one that may contain NUL bytes.
const (
	FieldNone        Field = iota // no such argument
	FieldFunction                 // function name
	FieldUnique                   // client-chosen unique ID
	FieldHandle                   // job handle
	FieldData                     // opaque workload, result, echo or exception data
	FieldNumerator                // percent complete numerator (decimal)
	FieldDenominator              // percent complete denominator (decimal)
	FieldKnown                    // STATUS_RES*: "1" if the server knows the job
	FieldRunning                  // STATUS_RES*: "1" if a worker runs the job
	FieldCode                     // ERROR: error code, e.g. QUEUE_ERROR
	FieldText                     // ERROR: error text
	FieldClientID                 // SET_CLIENT_ID: worker ID
	FieldTimeout                  // CAN_DO_TIMEOUT: timeout (decimal)
	FieldOption                   // OPTION_REQ/OPTION_RES: option name
	FieldReducer                  // map/reduce: reducer function name
	FieldAggregator               // SUBMIT_REDUCE_JOB*: aggregator (libgearman sends it empty)
	FieldEpoch                    // SUBMIT_JOB_EPOCH: run time, Unix seconds (decimal)
	FieldMinute                   // SUBMIT_JOB_SCHED: 0-59
	FieldHour                     // SUBMIT_JOB_SCHED: 0-23
	FieldDayOfMonth               // SUBMIT_JOB_SCHED: 1-31
	FieldMonth                    // SUBMIT_JOB_SCHED: 1-12
	FieldDayOfWeek                // SUBMIT_JOB_SCHED: 0-6, 0 = Monday
	FieldClientCount              // STATUS_RES_UNIQUE: number of waiting clients
	numFields
)

var fieldNames = [numFields]string{
	"none", "function", "unique", "handle", "data", "numerator", "denominator",
	"known", "running", "code", "text", "client_id", "timeout", "option",
	"reducer", "aggregator", "epoch", "minute", "hour", "day_of_month", "month",
	"day_of_week", "client_count",
}

// String returns the field's name in snake case, e.g. "handle".
func (f Field) String() string {
	if f < numFields {
		return fieldNames[f]
	}
	return "Field(" + strconv.Itoa(int(f)) + ")"
}

// typeInfo is one row of the argument layout table.
type typeInfo struct {
	name  string
	valid bool
	req   bool // sent with "\0REQ" (to the server)
	res   bool // sent with "\0RES" (by the server)
	n     uint8
	args  [MaxArgs]Field
}

func row(name string, req, res bool, args ...Field) typeInfo {
	ti := typeInfo{name: name, valid: true, req: req, res: res, n: uint8(len(args))}
	copy(ti.args[:], args)
	return ti
}

// Shorthands that keep the table one line per type.
const (
	aFunc   = FieldFunction
	aUniq   = FieldUnique
	aHandle = FieldHandle
	aData   = FieldData
	aNum    = FieldNumerator
	aDen    = FieldDenominator
)

// types is the argument layout of every packet type, indexed by Type.
//
// Counts follow gearmand 2.0's command table (libgearman/command.cc), where
// a type has argc NUL-terminated arguments plus, if its data flag is set, a
// trailing data argument; here both are one list whose last entry is sized by
// the packet length. Directions follow the protocol document; 37-42 follow
// gearmand's server (libgearman-server/server.cc) and client (add.cc, job.cc).
var types = [...]typeInfo{
	0:                         {name: "TEXT"}, // gearmand's internal number for admin lines; never on the wire
	CanDo:                     row("CAN_DO", true, false, aFunc),
	CantDo:                    row("CANT_DO", true, false, aFunc),
	ResetAbilities:            row("RESET_ABILITIES", true, false),
	PreSleep:                  row("PRE_SLEEP", true, false),
	5:                         {name: "UNUSED"},
	Noop:                      row("NOOP", false, true),
	SubmitJob:                 row("SUBMIT_JOB", true, false, aFunc, aUniq, aData),
	JobCreated:                row("JOB_CREATED", false, true, aHandle),
	GrabJob:                   row("GRAB_JOB", true, false),
	NoJob:                     row("NO_JOB", false, true),
	JobAssign:                 row("JOB_ASSIGN", false, true, aHandle, aFunc, aData),
	WorkStatus:                row("WORK_STATUS", true, true, aHandle, aNum, aDen),
	WorkComplete:              row("WORK_COMPLETE", true, true, aHandle, aData),
	WorkFail:                  row("WORK_FAIL", true, true, aHandle),
	GetStatus:                 row("GET_STATUS", true, false, aHandle),
	EchoReq:                   row("ECHO_REQ", true, false, aData),
	EchoRes:                   row("ECHO_RES", false, true, aData),
	SubmitJobBg:               row("SUBMIT_JOB_BG", true, false, aFunc, aUniq, aData),
	Error:                     row("ERROR", false, true, FieldCode, FieldText),
	StatusRes:                 row("STATUS_RES", false, true, aHandle, FieldKnown, FieldRunning, aNum, aDen),
	SubmitJobHigh:             row("SUBMIT_JOB_HIGH", true, false, aFunc, aUniq, aData),
	SetClientID:               row("SET_CLIENT_ID", true, false, FieldClientID),
	CanDoTimeout:              row("CAN_DO_TIMEOUT", true, false, aFunc, FieldTimeout),
	AllYours:                  row("ALL_YOURS", true, false),
	WorkException:             row("WORK_EXCEPTION", true, true, aHandle, aData),
	OptionReq:                 row("OPTION_REQ", true, false, FieldOption),
	OptionRes:                 row("OPTION_RES", false, true, FieldOption),
	WorkData:                  row("WORK_DATA", true, true, aHandle, aData),
	WorkWarning:               row("WORK_WARNING", true, true, aHandle, aData),
	GrabJobUniq:               row("GRAB_JOB_UNIQ", true, false),
	JobAssignUniq:             row("JOB_ASSIGN_UNIQ", false, true, aHandle, aFunc, aUniq, aData),
	SubmitJobHighBg:           row("SUBMIT_JOB_HIGH_BG", true, false, aFunc, aUniq, aData),
	SubmitJobLow:              row("SUBMIT_JOB_LOW", true, false, aFunc, aUniq, aData),
	SubmitJobLowBg:            row("SUBMIT_JOB_LOW_BG", true, false, aFunc, aUniq, aData),
	SubmitJobSched:            row("SUBMIT_JOB_SCHED", true, false, aFunc, aUniq, FieldMinute, FieldHour, FieldDayOfMonth, FieldMonth, FieldDayOfWeek, aData),
	SubmitJobEpoch:            row("SUBMIT_JOB_EPOCH", true, false, aFunc, aUniq, FieldEpoch, aData),
	SubmitReduceJob:           row("SUBMIT_REDUCE_JOB", true, false, aFunc, aUniq, FieldReducer, FieldAggregator, aData),
	SubmitReduceJobBackground: row("SUBMIT_REDUCE_JOB_BACKGROUND", true, false, aFunc, aUniq, FieldReducer, FieldAggregator, aData),
	GrabJobAll:                row("GRAB_JOB_ALL", true, false),
	JobAssignAll:              row("JOB_ASSIGN_ALL", false, true, aHandle, aFunc, aUniq, FieldReducer, aData),
	GetStatusUnique:           row("GET_STATUS_UNIQUE", true, false, aUniq),
	StatusResUnique:           row("STATUS_RES_UNIQUE", false, true, aUniq, FieldKnown, FieldRunning, aNum, aDen, FieldClientCount),
}

// Valid reports whether t is a packet type this package decodes: 1-4 and
// 6-42. Type 5 is unused by the protocol.
func (t Type) Valid() bool {
	return int(t) < len(types) && types[t].valid
}

// String returns the wire name of t as the protocol document spells it,
// e.g. "SUBMIT_JOB", or "Type(99)" for a number outside the table.
func (t Type) String() string {
	if int(t) < len(types) {
		return types[t].name
	}
	return "Type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// NumArgs returns how many arguments a packet of type t carries, the last one
// sized by the packet length. It returns -1 for an invalid type.
func (t Type) NumArgs() int {
	if !t.Valid() {
		return -1
	}
	return int(types[t].n)
}

// ArgField returns the meaning of argument i of type t, or FieldNone when t
// has no argument i.
func (t Type) ArgField(i int) Field {
	if !t.Valid() || i < 0 || i >= int(types[t].n) {
		return FieldNone
	}
	return types[t].args[i]
}

// ArgIndex returns the position of the argument meaning f in packets of type
// t, or -1 when the type has no such argument.
func (t Type) ArgIndex(f Field) int {
	if !t.Valid() || f == FieldNone {
		return -1
	}
	ti := &types[t]
	for i := 0; i < int(ti.n); i++ {
		if ti.args[i] == f {
			return i
		}
	}
	return -1
}

// SentWith reports whether the protocol sends packets of type t with magic m:
// requests go to the server ("\0REQ"), responses come from it ("\0RES"). The
// WORK_* types travel both ways. The Reader does not enforce this (gearmand
// answers a "\0RES" packet with ERROR INVALID_MAGIC and keeps the connection,
// which is the engine's call); it is here for engines and gateways.
func (t Type) SentWith(m Magic) bool {
	if !t.Valid() {
		return false
	}
	switch m {
	case Req:
		return types[t].req
	case Res:
		return types[t].res
	}
	return false
}

// Valid reports whether m is Req or Res.
func (m Magic) Valid() bool { return m == Req || m == Res }

// String returns "REQ" or "RES" (the magic code without its leading NUL),
// or "Magic(n)" for any other value.
func (m Magic) String() string {
	switch m {
	case Req:
		return "REQ"
	case Res:
		return "RES"
	}
	return "Magic(" + strconv.Itoa(int(m)) + ")"
}

// magicBytes returns the four wire bytes of m. An invalid Magic encodes as
// four NULs, which no decoder accepts, so the mistake surfaces at the peer
// instead of turning silently into a valid packet.
func magicBytes(m Magic) (b0, b1, b2, b3 byte) {
	switch m {
	case Req:
		return 0, 'R', 'E', 'Q'
	case Res:
		return 0, 'R', 'E', 'S'
	}
	return 0, 0, 0, 0
}

// parseMagic decodes the first four header bytes.
func parseMagic(b []byte) Magic {
	if b[0] != 0 || b[1] != 'R' || b[2] != 'E' {
		return 0
	}
	switch b[3] {
	case 'Q':
		return Req
	case 'S':
		return Res
	}
	return 0
}
