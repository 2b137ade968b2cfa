package metrics

import (
	"fmt"
	"strings"
	"sync/atomic"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
	gmcodec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/prometheus/client_golang/prometheus"
)

// Result is the result label of jobgate_commands_total: how a command was
// answered, in a few classes so alerts can tell client mistakes from
// jobgate or backend trouble.
type Result uint8

// The results.
const (
	// ResultOK: the command did what was asked.
	ResultOK Result = iota
	// ResultMiss: a valid negative answer, not an error: NOT_FOUND,
	// TIMED_OUT, DEADLINE_SOON, NOT_IGNORED; Gearman NO_JOB.
	ResultMiss
	// ResultClientError: bad input answered with the protocol's own error:
	// BAD_FORMAT, UNKNOWN_COMMAND, JOB_TOO_BIG, EXPECTED_CRLF; a Gearman
	// ERROR for a malformed or unexpected packet.
	ResultClientError
	// ResultDenied: refused by authentication or a per-name rule.
	ResultDenied
	// ResultServerError: jobgate could not serve it: OUT_OF_MEMORY,
	// INTERNAL_ERROR, DRAINING, a journal failure.
	ResultServerError
	// ResultBackendError: the backend owning the name was unreachable,
	// timed out or had its breaker open.
	ResultBackendError
	numResults
)

var resultNames = [numResults]string{
	ResultOK:           "ok",
	ResultMiss:         "miss",
	ResultClientError:  "client_error",
	ResultDenied:       "denied",
	ResultServerError:  "server_error",
	ResultBackendError: "backend_error",
}

// String returns the label value, e.g. "client_error".
func (r Result) String() string {
	if r < numResults {
		return resultNames[r]
	}
	return fmt.Sprintf("Result(%d)", uint8(r))
}

// cmdSlots is the size of the per-protocol command table: Gearman packet
// types go up to 42, Beanstalk verbs to 25. Slot 0 is "unknown" and
// gearmanAdminSlot the Gearman text admin protocol.
const (
	cmdSlots         = 64
	gearmanAdminSlot = cmdSlots - 1
)

// Command labels, indexed by slot; "" marks a slot that is not a command.
var cmdLabels = func() (t [numProtocols][cmdSlots]string) {
	for p := range numProtocols {
		t[p][0] = "unknown"
	}
	t[Gearman][gearmanAdminSlot] = "admin"
	for i := 1; i < gearmanAdminSlot; i++ {
		if ty := gmcodec.Type(i); ty.Valid() {
			t[Gearman][i] = ty.String()
		}
		// Verb has no exported validity test; String spells invalid ones
		// "Verb(n)".
		if s := bscodec.Verb(i).String(); !strings.HasPrefix(s, "Verb(") {
			t[Beanstalk][i] = s
		}
	}
	return t
}()

// Commands counts commands as jobgate_commands_total{protocol,command,
// result}. The command label is the wire spelling: Gearman packet names
// ("SUBMIT_JOB", "GRAB_JOB_UNIQ", "admin" for any text admin command),
// Beanstalk command words ("put", "reserve-with-timeout"); "unknown" for
// anything else. A series appears on its first count.
//
// Counting costs an array index, an atomic load and an atomic add: the
// series handles are created once, on first use, and cached in a fixed
// table, so the hot path takes no lock and allocates nothing.
type Commands struct {
	vec   *prometheus.CounterVec
	cells [numProtocols][cmdSlots][numResults]atomic.Pointer[counterCell]
}

// counterCell boxes a resolved counter so it fits an atomic.Pointer.
type counterCell struct{ c prometheus.Counter }

func (c *Commands) init(reg prometheus.Registerer) {
	c.vec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobgate_commands_total",
		Help: "Client commands by protocol, command (wire spelling) and result class.",
	}, []string{"protocol", "command", "result"})
	reg.MustRegister(c.vec)
}

// Gearman counts one Gearman request packet of type t.
func (c *Commands) Gearman(t gmcodec.Type, r Result) {
	slot := 0
	if t < gearmanAdminSlot && cmdLabels[Gearman][t] != "" {
		slot = int(t)
	}
	c.count(Gearman, slot, r)
}

// GearmanAdmin counts one line of the Gearman text admin protocol
// ("status", "workers", ...), all under the command "admin".
func (c *Commands) GearmanAdmin(r Result) { c.count(Gearman, gearmanAdminSlot, r) }

// Beanstalk counts one Beanstalk command with verb v; 0 (a line that did
// not parse) counts as "unknown".
func (c *Commands) Beanstalk(v bscodec.Verb, r Result) {
	slot := 0
	if int(v) < gearmanAdminSlot && cmdLabels[Beanstalk][v] != "" {
		slot = int(v)
	}
	c.count(Beanstalk, slot, r)
}

func (c *Commands) count(p Protocol, slot int, r Result) {
	if r >= numResults {
		r = ResultServerError
	}
	cell := &c.cells[p][slot][r]
	if cc := cell.Load(); cc != nil {
		cc.c.Inc()
		return
	}
	// First use: WithLabelValues returns the same child to racing callers,
	// so storing twice is harmless.
	cc := &counterCell{c.vec.WithLabelValues(p.String(), cmdLabels[p][slot], r.String())}
	cell.Store(cc)
	cc.c.Inc()
}
