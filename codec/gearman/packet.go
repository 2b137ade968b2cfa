// Package gearman encodes and decodes the Gearman protocol: binary packets
// ("\0REQ"/"\0RES" framed) and the admin text lines that share the same port.
//
// One Packet type serves all 42 packet types rather than one Go type per
// packet: every Gearman packet has the same shape (magic, type, NUL-separated
// arguments whose last one is sized by the packet length), so a single struct
// decodes with no per-type allocation or dispatch, passes through a gateway
// untouched, and re-encodes byte for byte. The per-type knowledge (how many
// arguments, what each one means) lives in a table and in typed accessors.
package gearman

// Magic tells a request ("\0REQ", sent to the server) from a response
// ("\0RES", sent by the server).
type Magic uint8

// The two magic codes.
const (
	Req Magic = iota + 1 // "\0REQ": client or worker to server
	Res                  // "\0RES": server to client or worker
)

// Type is a binary packet type, as numbered on the wire.
type Type uint32

// Packet types 1–36 of the protocol document and gearmand 2.0's 37–42.
// Type 5 is unused.
const (
	CanDo                     Type = 1
	CantDo                    Type = 2
	ResetAbilities            Type = 3
	PreSleep                  Type = 4
	Noop                      Type = 6
	SubmitJob                 Type = 7
	JobCreated                Type = 8
	GrabJob                   Type = 9
	NoJob                     Type = 10
	JobAssign                 Type = 11
	WorkStatus                Type = 12
	WorkComplete              Type = 13
	WorkFail                  Type = 14
	GetStatus                 Type = 15
	EchoReq                   Type = 16
	EchoRes                   Type = 17
	SubmitJobBg               Type = 18
	Error                     Type = 19
	StatusRes                 Type = 20
	SubmitJobHigh             Type = 21
	SetClientID               Type = 22
	CanDoTimeout              Type = 23
	AllYours                  Type = 24
	WorkException             Type = 25
	OptionReq                 Type = 26
	OptionRes                 Type = 27
	WorkData                  Type = 28
	WorkWarning               Type = 29
	GrabJobUniq               Type = 30
	JobAssignUniq             Type = 31
	SubmitJobHighBg           Type = 32
	SubmitJobLow              Type = 33
	SubmitJobLowBg            Type = 34
	SubmitJobSched            Type = 35
	SubmitJobEpoch            Type = 36
	SubmitReduceJob           Type = 37
	SubmitReduceJobBackground Type = 38
	GrabJobAll                Type = 39
	JobAssignAll              Type = 40
	GetStatusUnique           Type = 41
	StatusResUnique           Type = 42
)

// Packet is one binary packet.
//
// A Packet returned by a Reader aliases the Reader's buffer: Args (and the
// slice holding them) are valid only until the next call to the Reader.
// Copy what must be kept longer.
type Packet struct {
	Magic Magic
	Type  Type
	// Args are the NUL-separated arguments, in wire order. The last argument
	// is delimited by the packet length and may itself contain NUL bytes.
	Args [][]byte
}
