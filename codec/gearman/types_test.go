package gearman

import (
	"testing"
)

// gearmandLayout is gearmand 2.0's command table (libgearman/command.cc):
// NUL-terminated arguments, and whether a data argument follows. It is
// restated here independently of types.go so that the two check each other.
var gearmandLayout = map[Type]struct {
	name string
	argc int
	data bool
}{
	CanDo:                     {"CAN_DO", 1, false},
	CantDo:                    {"CANT_DO", 1, false},
	ResetAbilities:            {"RESET_ABILITIES", 0, false},
	PreSleep:                  {"PRE_SLEEP", 0, false},
	Noop:                      {"NOOP", 0, false},
	SubmitJob:                 {"SUBMIT_JOB", 2, true},
	JobCreated:                {"JOB_CREATED", 1, false},
	GrabJob:                   {"GRAB_JOB", 0, false},
	NoJob:                     {"NO_JOB", 0, false},
	JobAssign:                 {"JOB_ASSIGN", 2, true},
	WorkStatus:                {"WORK_STATUS", 3, false},
	WorkComplete:              {"WORK_COMPLETE", 1, true},
	WorkFail:                  {"WORK_FAIL", 1, false},
	GetStatus:                 {"GET_STATUS", 1, false},
	EchoReq:                   {"ECHO_REQ", 0, true},
	EchoRes:                   {"ECHO_RES", 0, true},
	SubmitJobBg:               {"SUBMIT_JOB_BG", 2, true},
	Error:                     {"ERROR", 2, false},
	StatusRes:                 {"STATUS_RES", 5, false},
	SubmitJobHigh:             {"SUBMIT_JOB_HIGH", 2, true},
	SetClientID:               {"SET_CLIENT_ID", 1, false},
	CanDoTimeout:              {"CAN_DO_TIMEOUT", 2, false},
	AllYours:                  {"ALL_YOURS", 0, false},
	WorkException:             {"WORK_EXCEPTION", 1, true},
	OptionReq:                 {"OPTION_REQ", 1, false},
	OptionRes:                 {"OPTION_RES", 1, false},
	WorkData:                  {"WORK_DATA", 1, true},
	WorkWarning:               {"WORK_WARNING", 1, true},
	GrabJobUniq:               {"GRAB_JOB_UNIQ", 0, false},
	JobAssignUniq:             {"JOB_ASSIGN_UNIQ", 3, true},
	SubmitJobHighBg:           {"SUBMIT_JOB_HIGH_BG", 2, true},
	SubmitJobLow:              {"SUBMIT_JOB_LOW", 2, true},
	SubmitJobLowBg:            {"SUBMIT_JOB_LOW_BG", 2, true},
	SubmitJobSched:            {"SUBMIT_JOB_SCHED", 7, true},
	SubmitJobEpoch:            {"SUBMIT_JOB_EPOCH", 3, true},
	SubmitReduceJob:           {"SUBMIT_REDUCE_JOB", 4, true},
	SubmitReduceJobBackground: {"SUBMIT_REDUCE_JOB_BACKGROUND", 4, true},
	GrabJobAll:                {"GRAB_JOB_ALL", 0, false},
	JobAssignAll:              {"JOB_ASSIGN_ALL", 4, true},
	GetStatusUnique:           {"GET_STATUS_UNIQUE", 1, false},
	StatusResUnique:           {"STATUS_RES_UNIQUE", 6, false},
}

func TestLayoutMatchesGearmand(t *testing.T) {
	for typ := Type(0); typ < 50; typ++ {
		g, known := gearmandLayout[typ]
		if typ.Valid() != known {
			t.Errorf("%d.Valid() = %v, want %v", typ, typ.Valid(), known)
			continue
		}
		if !known {
			if typ.NumArgs() != -1 {
				t.Errorf("%d.NumArgs() = %d, want -1", typ, typ.NumArgs())
			}
			continue
		}
		want := g.argc
		if g.data {
			want++
		}
		if got := typ.NumArgs(); got != want {
			t.Errorf("%s.NumArgs() = %d, want %d", g.name, got, want)
		}
		if got := typ.String(); got != g.name {
			t.Errorf("Type(%d).String() = %q, want %q", typ, got, g.name)
		}
		if g.data && typ.ArgField(want-1) != FieldData {
			t.Errorf("%s: last argument is %s, want data", g.name, typ.ArgField(want-1))
		}
		for i := 0; i < want; i++ {
			if typ.ArgField(i) == FieldNone {
				t.Errorf("%s: argument %d has no meaning", g.name, i)
			}
			if got := typ.ArgIndex(typ.ArgField(i)); got != i {
				t.Errorf("%s: ArgIndex(%s) = %d, want %d", g.name, typ.ArgField(i), got, i)
			}
		}
		if typ.ArgField(want) != FieldNone || typ.ArgField(-1) != FieldNone {
			t.Errorf("%s: ArgField out of range is not FieldNone", g.name)
		}
		if !typ.SentWith(Req) && !typ.SentWith(Res) {
			t.Errorf("%s is sent with neither magic", g.name)
		}
	}
}

func TestTypeNames(t *testing.T) {
	for _, c := range []struct {
		typ  Type
		want string
	}{
		{0, "TEXT"}, {5, "UNUSED"}, {43, "Type(43)"}, {1 << 31, "Type(2147483648)"},
		{SubmitJob, "SUBMIT_JOB"}, {StatusResUnique, "STATUS_RES_UNIQUE"},
	} {
		if got := c.typ.String(); got != c.want {
			t.Errorf("Type(%d).String() = %q, want %q", uint32(c.typ), got, c.want)
		}
	}
	for _, c := range []struct {
		m    Magic
		want string
	}{{Req, "REQ"}, {Res, "RES"}, {0, "Magic(0)"}, {7, "Magic(7)"}} {
		if got := c.m.String(); got != c.want {
			t.Errorf("Magic(%d).String() = %q, want %q", c.m, got, c.want)
		}
	}
	if FieldHandle.String() != "handle" || Field(200).String() != "Field(200)" {
		t.Errorf("Field.String: %q %q", FieldHandle.String(), Field(200).String())
	}
	if KindPacket.String() != "packet" || KindText.String() != "text" || FrameKind(0).String() != "none" {
		t.Error("FrameKind.String")
	}
}

func TestSentWith(t *testing.T) {
	for _, c := range []struct {
		typ      Type
		req, res bool
	}{
		{SubmitJob, true, false}, {JobCreated, false, true}, {WorkComplete, true, true},
		{WorkException, true, true}, {EchoReq, true, false}, {Error, false, true},
		{SubmitReduceJob, true, false}, {GrabJobAll, true, false}, {JobAssignAll, false, true},
		{GetStatusUnique, true, false}, {StatusResUnique, false, true}, {5, false, false},
	} {
		if c.typ.SentWith(Req) != c.req || c.typ.SentWith(Res) != c.res || c.typ.SentWith(0) {
			t.Errorf("%s: SentWith(Req)=%v SentWith(Res)=%v, want %v %v", c.typ,
				c.typ.SentWith(Req), c.typ.SentWith(Res), c.req, c.res)
		}
	}
}

// TestFieldPositions pins where each accessor looks, type by type.
func TestFieldPositions(t *testing.T) {
	for _, c := range []struct {
		typ                                  Type
		handle, function, unique, data, redu int
	}{
		{CanDo, -1, 0, -1, -1, -1},
		{SubmitJob, -1, 0, 1, 2, -1},
		{SubmitJobSched, -1, 0, 1, 7, -1},
		{SubmitJobEpoch, -1, 0, 1, 3, -1},
		{SubmitReduceJob, -1, 0, 1, 4, 2},
		{SubmitReduceJobBackground, -1, 0, 1, 4, 2},
		{JobCreated, 0, -1, -1, -1, -1},
		{JobAssign, 0, 1, -1, 2, -1},
		{JobAssignUniq, 0, 1, 2, 3, -1},
		{JobAssignAll, 0, 1, 2, 4, 3},
		{WorkStatus, 0, -1, -1, -1, -1},
		{WorkFail, 0, -1, -1, -1, -1},
		{EchoReq, -1, -1, -1, 0, -1},
		{GetStatusUnique, -1, -1, 0, -1, -1},
		{StatusResUnique, -1, -1, 0, -1, -1},
		{Error, -1, -1, -1, -1, -1},
	} {
		got := [5]int{c.typ.ArgIndex(FieldHandle), c.typ.ArgIndex(FieldFunction), c.typ.ArgIndex(FieldUnique),
			c.typ.ArgIndex(FieldData), c.typ.ArgIndex(FieldReducer)}
		want := [5]int{c.handle, c.function, c.unique, c.data, c.redu}
		if got != want {
			t.Errorf("%s: handle/function/unique/data/reducer at %v, want %v", c.typ, got, want)
		}
	}
	if got := StatusResUnique.ArgIndex(FieldClientCount); got != 5 {
		t.Errorf("STATUS_RES_UNIQUE client count at %d, want 5", got)
	}
	if got := Error.ArgIndex(FieldText); got != 1 {
		t.Errorf("ERROR text at %d, want 1", got)
	}
	if Type(99).ArgIndex(FieldHandle) != -1 || SubmitJob.ArgIndex(FieldNone) != -1 {
		t.Error("ArgIndex of invalid type or FieldNone")
	}
}
