package gearman

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// maxClientIDLen is how much of a SET_CLIENT_ID gearmand keeps (its
// 128-byte buffer with the terminating NUL).
const maxClientIDLen = 127

// Session is one connection's view of the engine: a client, a worker, an
// admin, or all three. Its methods are safe for concurrent use, but a
// connection normally calls them from its read loop only.
type Session struct {
	e   *Engine
	out Output

	// All fields below are guarded by e.mu.
	info         SessionInfo
	id           string    // SET_CLIENT_ID, "-" when unset
	exceptions   bool      // OPTION_REQ exceptions
	sleeping     bool      // sent PRE_SLEEP and no GRAB since
	noopSent     bool      // woken with NOOP and no GRAB since
	wokeFor      *function // the function whose new job sent that NOOP, if one did
	closed       bool
	loopWrites   bool       // an event loop serves the session and calls Engine.WriteQueued (held.go)
	barrier      uint64     // the journal flight this session's next output waits for (held.go)
	held         []heldItem // output waiting for the journal, in order
	heldBuf      []byte     // the bytes of held
	inHeld       bool       // listed in e.heldSess
	abilities    []ability  // registered functions
	running      jobList    // jobs this worker holds, in grab order (see unassign)
	nrunning     int        // length of running
	attached     *attach    // jobs this client waits for
	prevS, nextS *Session   // engine's session list
	outcome      Outcome    // of the last Handle; written only by Handle (observe.go)
	creation     Creation   // for the next submit; owned by Handle's caller (trace.go)
	submitAt     int64      // the next submit's time on the trace clock, or 0 (SetCreationAt)
	lastJob      uint64     // the job of the last Handle; written only by Handle (trace.go)
	lastTraced   bool       // lastJob is traced; written only by Handle
	lastTrace    JobTrace   // lastJob's trace, when a grab assigned it traced; written only by Handle
	lastErr      string     // the ERROR code of the last Handle; written only by Handle
}

// ability is one function a worker registered, with its CAN_DO_TIMEOUT.
type ability struct {
	fn      *function
	timeout time.Duration // 0: none
}

// NewSession opens a session whose packets go to out.
func (e *Engine) NewSession(info SessionInfo, out Output) *Session {
	s := &Session{e: e, out: out, info: info, id: "-"}
	e.mu.Lock()
	s.exceptions = e.cfg.Exceptions
	s.nextS = e.sessions
	if e.sessions != nil {
		e.sessions.prevS = s
	}
	e.sessions = s
	e.mu.Unlock()
	return s
}

// Close ends the session: the jobs its worker held are requeued (or
// dropped at the retry limit), it stops waiting for its foreground jobs
// (queued ones nobody else waits for are dropped) and it leaves the worker
// lists. Close is idempotent.
func (s *Session) Close() {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.held, s.heldBuf = nil, nil // nobody to send them to
	woken := s.noopSent
	s.setWake(false, false) // requeues below must not wake this session
	// Detach first: a session may be the client of a job it runs, and
	// requeueing may send WORK_FAIL to the clients.
	for s.attached != nil {
		e.detachClient(s.attached)
	}
	for s.running.tail != nil {
		e.requeue(s.running.tail, ReturnWorkerLost)
	}
	abilities := s.abilities
	for i := range abilities {
		abilities[i].fn.removeWorker(s)
	}
	s.abilities = nil
	if woken {
		e.wakeFor(abilities)
	}
	if s.prevS != nil {
		s.prevS.nextS = s.nextS
	} else {
		e.sessions = s.nextS
	}
	if s.nextS != nil {
		s.nextS.prevS = s.prevS
	}
	s.prevS, s.nextS = nil, nil
}

// wakeable reports whether a NOOP would wake s: it sleeps and was not
// woken yet.
func (s *Session) wakeable() bool { return s.sleeping && !s.noopSent }

// setWake changes the sleep state, keeping each function's count of
// wakeable workers right.
func (s *Session) setWake(sleeping, noopSent bool) {
	was := s.wakeable()
	s.sleeping, s.noopSent = sleeping, noopSent
	s.wokeFor = nil
	if now := s.wakeable(); now != was {
		d := 1
		if !now {
			d = -1
		}
		for i := range s.abilities {
			s.abilities[i].fn.sleepers += d
		}
	}
}

// unlinkAttach removes a from the session's attachment list.
func (s *Session) unlinkAttach(a *attach) {
	if a.sprev != nil {
		a.sprev.snext = a.snext
	} else if s.attached == a {
		s.attached = a.snext
	}
	if a.snext != nil {
		a.snext.sprev = a.sprev
	}
	a.sprev, a.snext = nil, nil
}

// timeoutFor returns the CAN_DO_TIMEOUT s registered for f.
func (s *Session) timeoutFor(f *function) time.Duration {
	for i := range s.abilities {
		if s.abilities[i].fn == f {
			return s.abilities[i].timeout
		}
	}
	return 0
}

// minArgs is the number of arguments (the data counted as one) each request
// needs; a shorter packet closes the connection, like gearmand.
var minArgs = [...]int{
	codec.CanDo: 1, codec.CantDo: 1, codec.CanDoTimeout: 2,
	codec.SubmitJob: 3, codec.SubmitJobBg: 3, codec.SubmitJobHigh: 3,
	codec.SubmitJobHighBg: 3, codec.SubmitJobLow: 3, codec.SubmitJobLowBg: 3,
	codec.SubmitJobSched: 8, codec.SubmitJobEpoch: 4,
	codec.SubmitReduceJob: 5, codec.SubmitReduceJobBackground: 5,
	codec.GetStatus: 1, codec.GetStatusUnique: 1, codec.OptionReq: 1,
	codec.SetClientID: 1, codec.WorkStatus: 3, codec.WorkComplete: 2,
	codec.WorkFail: 1, codec.WorkException: 2, codec.WorkData: 2,
	codec.WorkWarning: 2,
}

// Handle runs one binary request and emits its reply (if any) to the
// session's Output. A non-nil error means the connection must be closed
// (ErrBadPacket); protocol errors the connection survives are answered
// with ERROR packets instead. p's memory is not kept.
func (s *Session) Handle(p *codec.Packet) error {
	e := s.e
	e.mu.Lock()
	s.outcome = OutcomeOK
	s.lastJob, s.lastErr, s.lastTraced = 0, "", false
	e.handling = s
	e.quiet = s.loopWrites && e.qjr != nil
	err := s.handleLocked(p)
	e.quiet = false
	e.handling = nil
	if err != nil {
		s.outcome = OutcomeClientError
	}
	e.mu.Unlock()
	return err
}

func (s *Session) handleLocked(p *codec.Packet) error {
	e := s.e
	if s.closed {
		return nil
	}
	if p.Magic != codec.Req {
		e.emitError(s, "INVALID_MAGIC", "Request magic expected")
		return nil
	}
	if int(p.Type) < len(minArgs) && len(p.Args) < minArgs[p.Type] {
		return fmt.Errorf("%w: type %d needs %d arguments, got %d", ErrBadPacket, p.Type, minArgs[p.Type], len(p.Args))
	}
	a := p.Args
	switch p.Type {
	case codec.EchoReq:
		var data []byte
		if len(a) > 0 {
			data = a[len(a)-1]
		}
		e.emit(s, codec.EchoRes, data)
	case codec.SubmitJob:
		s.submit(a[0], a[1], a[2], prioNormal, false, 0, nil)
	case codec.SubmitJobBg:
		s.submit(a[0], a[1], a[2], prioNormal, true, 0, nil)
	case codec.SubmitJobHigh:
		s.submit(a[0], a[1], a[2], prioHigh, false, 0, nil)
	case codec.SubmitJobHighBg:
		s.submit(a[0], a[1], a[2], prioHigh, true, 0, nil)
	case codec.SubmitJobLow:
		s.submit(a[0], a[1], a[2], prioLow, false, 0, nil)
	case codec.SubmitJobLowBg:
		s.submit(a[0], a[1], a[2], prioLow, true, 0, nil)
	case codec.SubmitJobEpoch:
		// gearmand parses with strtoll: leading digits, garbage reads as 0
		// (run now).
		when := parseLeadingInt(a[2])
		var at int64
		switch {
		case when > math.MaxInt64/int64(time.Second):
			at = math.MaxInt64 // after 2262: never, rather than overflow into the past
		case when > 0:
			at = when * int64(time.Second)
		}
		s.submit(a[0], a[1], a[3], prioNormal, true, at, nil)
	case codec.SubmitJobSched:
		at, ok := e.schedTime(a[2], a[3], a[4], a[5], a[6])
		if !ok {
			e.emitError(s, "INVALID_ARGUMENT", "Invalid schedule")
			return nil
		}
		s.submit(a[0], a[1], a[7], prioNormal, true, at, nil)
	case codec.SubmitReduceJob, codec.SubmitReduceJobBackground:
		// fn, unique, reducer, aggregator, data
		s.submit(a[0], a[1], a[4], prioNormal, p.Type == codec.SubmitReduceJobBackground, 0, a[2])
	case codec.GetStatus:
		s.getStatus(a[0])
	case codec.GetStatusUnique:
		s.getStatusUnique(a[0])
	case codec.OptionReq:
		if !bytes.EqualFold(a[0], []byte("exceptions")) {
			e.emitError(s, "UNKNOWN_OPTION", "Server does not recognize given option")
			return nil
		}
		s.exceptions = true
		e.emit(s, codec.OptionRes, a[0])
	case codec.CanDo:
		s.canDo(a[0], 0)
	case codec.CanDoTimeout:
		s.canDo(a[0], canDoTimeout(parseLeadingInt(a[1])))
	case codec.CantDo:
		s.cantDo(a[0])
	case codec.ResetAbilities:
		s.resetAbilities()
	case codec.PreSleep:
		s.preSleep()
	case codec.GrabJob, codec.GrabJobUniq, codec.GrabJobAll:
		s.grab(p.Type)
	case codec.WorkData, codec.WorkWarning:
		s.workData(p.Type, a[0], a[1])
	case codec.WorkStatus:
		s.workStatus(a[0], a[1], a[2])
	case codec.WorkComplete, codec.WorkException:
		s.workDone(p.Type, a[0], a[1])
	case codec.WorkFail:
		s.workDone(p.Type, a[0], nil)
	case codec.SetClientID:
		// An empty id is listed empty, as gearmand does; "-" is only for
		// a connection that never set one. gearmand keeps 127 bytes.
		s.id = string(a[0][:min(len(a[0]), maxClientIDLen)])
	default:
		// Responses sent as requests, ALL_YOURS, type 5 and unknown types.
		e.emitError(s, "INVALID_COMMAND", "Command not expected")
	}
	return nil
}

// submit runs one SUBMIT_JOB* request.
func (s *Session) submit(fn, unique, data []byte, prio uint8, bg bool, at int64, reducer []byte) {
	e := s.e
	if len(unique) > MaxUniqueLen {
		e.emitError(s, "ARGUMENT_TOO_LARGE", "Unique value too large")
		return
	}
	client := s
	if bg {
		client = nil
	}
	e.submitCreation, s.creation = s.creation, Creation{}
	e.submitAt, s.submitAt = s.submitAt, 0
	j, res, gate := e.submit(fn, unique, data, prio, client, at, reducer)
	e.submitCreation, e.submitAt = Creation{}, 0
	if j != nil {
		s.lastJob = j.id
	}
	if res == submitCreated && e.obs != nil {
		e.obs.JobSubmitted(j.fn.name)
	}
	switch {
	case res == submitFull:
		e.emitError(s, "QUEUE_ERROR", "Job queue is full")
	case res == submitFailed:
		e.emitError(s, codecQueueError, textPersistFailed)
	case gate != 0:
		// JOB_CREATED once the record is durable, or the error if the
		// write fails (held.go).
		s.wait(gate)
		e.hold(s, heldItem{created: true, job: j.id, jflight: gate}, nil, nil)
	default:
		e.scratch = e.handle(e.scratch[:0], j)
		e.emit(s, codec.JobCreated, e.scratch)
	}
}

// getStatus answers GET_STATUS.
func (s *Session) getStatus(h []byte) {
	e := s.e
	j := e.lookup(h)
	if j == nil {
		e.emit(s, codec.StatusRes, h, zero, zero, zero, zero)
		return
	}
	b := e.scratch[:0]
	b = strconv.AppendUint(b, uint64(j.num), 10)
	n := len(b)
	b = strconv.AppendUint(b, uint64(j.den), 10)
	e.scratch = b
	e.emit(s, codec.StatusRes, h, one, boolArg(j.state == stateRunning), b[:n], b[n:])
}

// getStatusUnique answers GET_STATUS_UNIQUE: the newest job with that
// unique id in any function (as gearmand, whose unique hash chains put
// the newest job first), with its client count.
func (s *Session) getStatusUnique(u []byte) {
	e := s.e
	var j *job
	for _, f := range e.funcList {
		if f.uniq != nil {
			if k := f.uniq[string(u)]; k != nil && (j == nil || k.id > j.id) {
				j = k
			}
		}
	}
	if j == nil {
		e.emit(s, codec.StatusResUnique, u, zero, zero, zero, zero, zero)
		return
	}
	clients := 0
	for a := j.clients; a != nil; a = a.jnext {
		clients++
	}
	b := e.scratch[:0]
	b = strconv.AppendUint(b, uint64(j.num), 10)
	n1 := len(b)
	b = strconv.AppendUint(b, uint64(j.den), 10)
	n2 := len(b)
	b = strconv.AppendUint(b, uint64(clients), 10)
	e.scratch = b
	e.emit(s, codec.StatusResUnique, u, one, boolArg(j.state == stateRunning), b[:n1], b[n1:n2], b[n2:])
}

var (
	zero = []byte("0")
	one  = []byte("1")
)

func boolArg(b bool) []byte {
	if b {
		return one
	}
	return zero
}

// parseLeadingInt reads leading white space, an optional sign and decimal
// digits like strtoll, returning 0 when there are none and saturating at
// the int64 limits (gearmand's atoi is strtol cut to an int, so a huge
// WORK_STATUS numerator reads as 4294967295).
func parseLeadingInt(b []byte) int64 {
	i := 0
	for i < len(b) && (b[i] == ' ' || (b[i] >= '\t' && b[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	const limit = uint64(1) << 63 // -MinInt64; MaxInt64+1
	var n uint64
	over := false
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if over || n > (limit-d)/10 {
			over = true
			continue
		}
		n = n*10 + d
	}
	switch {
	case neg && (over || n == limit):
		return math.MinInt64
	case neg:
		return -int64(n)
	case over || n >= limit:
		return math.MaxInt64
	}
	return int64(n)
}
