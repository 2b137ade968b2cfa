// Package gearman is the in-process Gearman job server engine: function
// queues with three priorities, workers and their wakeups, unique-id
// coalescing, foreground clients, timeouts, retries, epoch and scheduled
// jobs, and gearmand's admin text protocol.
//
// The engine is pure: it owns no sockets and reads time only from the
// injected clock. Each connection gets a Session; the connection hands it
// decoded packets (Session.Handle) and admin lines (Session.HandleText), and
// the session writes what it answers, and what other sessions' actions cause
// (NOOP, WORK_*), to the Output given at NewSession.
//
// Persistence: with Config.Journal set (OpenJournal), background jobs are
// journaled before they are acknowledged and restored by New; see
// persist.go for the records and held.go for how JOB_CREATED waits for the
// disk without a request ever waiting for it.
//
// Concurrency: one mutex (Engine.mu) guards every job, function and session
// field marked "guarded by e.mu". Output methods are called with that mutex
// held; they must not call back into the engine. The clock's timer callback
// and the journal completer goroutine take the mutex like any session call.
// Lock order: FileJournal.mu, then Engine.mu, then the journal's own lock
// (AppendAsync is called under Engine.mu; compaction calls the engine's
// snapshot with no journal lock held).
package gearman

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/clock"
)

// MaxHandleLen is the longest job handle the protocol allows (64 bytes
// including gearmand's NUL terminator, so 63 visible bytes).
const MaxHandleLen = 63

// MaxUniqueLen is the longest unique id gearmand accepts; a longer one gets
// ERROR ARGUMENT_TOO_LARGE.
const MaxUniqueLen = 64

// maxCounterLen is the length of the largest handle counter (uint64).
const maxCounterLen = 20

// Config configures an Engine. The zero value is usable: New fills in the
// defaults documented on each field.
type Config struct {
	// HandlePrefix starts every job handle: a handle is
	// HandlePrefix + ":" + a decimal counter, like gearmand's
	// "H:<hostname>:<n>". Default "H:" + the host name. At most
	// MaxHandleLen-21 bytes, so handles stay within 64 bytes.
	HandlePrefix string
	// JobRetries is gearmand's --job-retries: a job whose run failed
	// (worker gone, CANT_DO, timeout) this many times is removed and its
	// clients get WORK_FAIL. 0 means no limit.
	JobRetries int
	// Clock gives the time and timers. Default clock.Real{}.
	Clock clock.Clock
	// Exceptions turns the "exceptions" option on for every new session,
	// like gearmand --exceptions.
	Exceptions bool
	// Version is what the admin "version" command reports. Default "jobgate".
	Version string
	// PID is what the admin "getpid" command reports. Default os.Getpid().
	PID int
	// Verbose is what the admin "verbose" command reports. Default "ERROR"
	// (gearmand's default level).
	Verbose string
	// Shutdown is called (without the engine lock) by the admin commands
	// "shutdown" and "shutdown graceful". The engine itself never stops;
	// the server decides. Nil disables the commands: they then answer
	// ERR UNKNOWN_COMMAND like gearmand 1.1.
	Shutdown func(graceful bool)
	// Journal, when set, makes background jobs durable (see persist.go):
	// New restores the jobs it holds, every background job is journaled
	// before its JOB_CREATED goes out, and its removal is journaled too.
	// Nil (the default) keeps jobs in memory only, at no cost. The engine
	// does not close it; close it after Stop.
	Journal Journal
	// Notify, when set, is called without the engine lock after the engine
	// wrote to Outputs from a goroutine of its own (the completer, once
	// journal records are durable), so the server can send what it wrote.
	// Output written from the clock's timer functions is not covered: the
	// server wraps the Clock for those. Nor is output released by
	// Engine.WriteQueued: its caller, an event loop, writes it out.
	Notify func()
}

// Output receives what the engine sends to one session: replies to its own
// requests, in request order, and async packets caused by other sessions
// (NOOP, WORK_DATA, WORK_WARNING, WORK_STATUS, WORK_COMPLETE, WORK_FAIL,
// WORK_EXCEPTION). The engine calls it with its lock held, from whichever
// goroutine caused the packet (or, for output that waited for the journal,
// from its completer goroutine, followed by Config.Notify, or from the
// event loop's goroutine in Engine.WriteQueued): implementations
// must be quick, must not block and must not call into the engine. The packet, its Args and the text are
// valid only during the call; copy or encode them at once.
type Output interface {
	// WritePacket sends a binary response packet (Magic is codec.Res).
	WritePacket(p *codec.Packet)
	// WriteText sends admin protocol text, already formatted with its line
	// endings.
	WriteText(b []byte)
}

// SessionInfo describes the connection behind a session, for the admin
// "workers" listing.
type SessionInfo struct {
	// FD is the connection's file descriptor (or any small number that
	// identifies it).
	FD int
	// Host is the peer's IP address.
	Host string
}

// ErrBadPacket is returned by Session.Handle for a packet the connection
// cannot survive (too few arguments): gearmand closes such connections.
var ErrBadPacket = errors.New("gearman: malformed packet")

// Engine is one Gearman job server. Its methods are safe for concurrent use.
type Engine struct {
	cfg    Config
	clk    clock.Clock
	prefix []byte // HandlePrefix + ":"

	mu       sync.Mutex
	funcs    map[string]*function // guarded by mu
	funcList []*function          // guarded by mu; creation order, for admin listings
	jobs     map[uint64]*job      // guarded by mu; every live job by handle counter
	lastID   uint64               // guarded by mu; last handle counter used
	seq      int64                // guarded by mu; enqueue sequence, FIFO across functions
	sessions *Session             // guarded by mu; newest first, for "workers"
	heap     timerHeap            // guarded by mu; delayed and timed jobs
	timer    clock.Timer          // guarded by mu; armed for heap's earliest deadline
	timerAt  int64                // guarded by mu; when timer fires (unix ns)
	timerGen uint64               // guarded by mu; identifies the armed timer
	freeAtt  []*attach            // guarded by mu; recycled attachments
	freeJobs []*job               // guarded by mu; recycled jobs (see newJob)
	pkt      codec.Packet         // guarded by mu; scratch for Output calls
	args     [6][]byte            // guarded by mu; scratch Args backing
	scratch  []byte               // guarded by mu; scratch for formatted numbers/handles
	text     []byte               // guarded by mu; scratch for admin replies

	// Metrics hooks (observe.go).
	obs       Observer // guarded by mu; nil: none
	timedFrom int64    // guarded by mu; the first enqueue sequence that is a time
	handling  *Session // guarded by mu; the session inside Handle, whose outcome emitError sets

	// Tracing (trace.go): recycled traces; the creation of the submit
	// being made; the hook.
	freeExts       []*jobExt  // guarded by mu; recycled job exts (traces, reducers)
	submitCreation Creation   // guarded by mu
	submitAt       int64      // guarded by mu; the submit's time on the trace clock, or 0
	thook          TraceHook  // guarded by mu
	ahook          AssignHook // guarded by mu; thook, if it is one
	tclock         TraceClock // guarded by mu; thook, if it is one

	// Persistence (persist.go, held.go); unused without a journal.
	jr            Journal      // cfg.Journal
	qjr           QuietJournal // jr, when it is one
	quiet         bool         // guarded by mu; a loop session's request is appending (appendLocked)
	snap          []byte       // guarded by mu; scratch for encoded records
	flights       []flight     // guarded by mu; batches being written, oldest first
	flightSeq     uint64       // guarded by mu; number of the newest flight
	doneSeq       uint64       // guarded by mu; every flight up to this one is retired
	failedSeq     uint64       // guarded by mu; the first flight that failed (MaxUint64: none)
	pendingJobs   jobList      // guarded by mu; journaled jobs waiting for their flight, by id
	heldSess      []*Session   // guarded by mu; sessions with held output
	fcond         sync.Cond    // on mu; signalled when flights becomes non-empty, and at Stop
	stopping      bool         // guarded by mu; Stop was called
	completerDone chan struct{}
}

// New returns an Engine with cfg's defaults filled in, or an error for an
// invalid configuration.
func New(cfg Config) (*Engine, error) {
	if cfg.HandlePrefix == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		cfg.HandlePrefix = "H:" + host
		if len(cfg.HandlePrefix) > MaxHandleLen-1-maxCounterLen {
			cfg.HandlePrefix = cfg.HandlePrefix[:MaxHandleLen-1-maxCounterLen]
		}
	}
	if len(cfg.HandlePrefix) > MaxHandleLen-1-maxCounterLen {
		return nil, fmt.Errorf("gearman: handle prefix %q is longer than %d bytes", cfg.HandlePrefix, MaxHandleLen-1-maxCounterLen)
	}
	for i := 0; i < len(cfg.HandlePrefix); i++ {
		if c := cfg.HandlePrefix[i]; c <= ' ' || c >= 0x7f {
			return nil, fmt.Errorf("gearman: handle prefix %q has a space, control or non-ASCII byte", cfg.HandlePrefix)
		}
	}
	if cfg.JobRetries < 0 || cfg.JobRetries > 255 {
		return nil, fmt.Errorf("gearman: job retries %d is outside 0..255", cfg.JobRetries)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Version == "" {
		cfg.Version = "jobgate"
	}
	if cfg.PID == 0 {
		cfg.PID = os.Getpid()
	}
	if cfg.Verbose == "" {
		cfg.Verbose = "ERROR"
	}
	e := &Engine{
		cfg:    cfg,
		clk:    cfg.Clock,
		prefix: []byte(cfg.HandlePrefix + ":"),
		funcs:  make(map[string]*function),
		jobs:   make(map[uint64]*job),
	}
	e.pkt.Magic = codec.Res
	e.failedSeq = math.MaxUint64
	e.fcond.L = &e.mu
	if cfg.Journal != nil {
		e.jr = cfg.Journal
		e.qjr, _ = cfg.Journal.(QuietJournal)
		if err := e.restore(); err != nil {
			e.Stop()
			return nil, err
		}
		e.completerDone = make(chan struct{})
		go e.runCompleter()
	}
	return e, nil
}

// Stop cancels the engine's timer and, with a journal, waits until the
// records already appended are durable and their held replies released,
// then ends the completer goroutine. Jobs stay in memory; sessions should
// be closed first. Stop is idempotent.
func (e *Engine) Stop() {
	e.mu.Lock()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
		e.timerGen++
	}
	e.stopping = true
	e.fcond.Broadcast()
	e.mu.Unlock()
	if e.completerDone != nil {
		<-e.completerDone
	}
}

// Stats is a snapshot of the engine's counters.
type Stats struct {
	Jobs      int // live jobs: queued, delayed and running
	Running   int // jobs held by a worker
	Functions int // known functions
	Sessions  int // open sessions
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Stats{Jobs: len(e.jobs), Functions: len(e.funcList)}
	for _, f := range e.funcList {
		st.Running += f.running
	}
	for s := e.sessions; s != nil; s = s.nextS {
		st.Sessions++
	}
	return st
}

// now returns the clock in unix nanoseconds.
func (e *Engine) now() int64 { return e.clk.Now().UnixNano() }

// function returns the named function, creating it.
func (e *Engine) function(name []byte) *function {
	if f, ok := e.funcs[string(name)]; ok { // no allocation: map lookup by converted key
		return f
	}
	f := &function{name: string(name)}
	e.funcs[f.name] = f
	e.funcList = append(e.funcList, f)
	return f
}

// emit sends a packet of type t with args to s, or holds it behind s's
// output that waits for the journal (held.go).
func (e *Engine) emit(s *Session, t codec.Type, args ...[]byte) {
	if e.gated(s) {
		e.hold(s, heldItem{typ: t}, args, nil)
		return
	}
	e.write(s, t, args...)
}

// write sends a packet of type t with args to s now.
func (e *Engine) write(s *Session, t codec.Type, args ...[]byte) {
	n := copy(e.args[:], args)
	e.pkt.Type = t
	e.pkt.Args = e.args[:n]
	s.out.WritePacket(&e.pkt)
	clear(e.args[:n])
	e.pkt.Args = nil
}

// emitError sends ERROR code\0text to s.
func (e *Engine) emitError(s *Session, code, text string) {
	if s == e.handling {
		s.outcome = errorOutcome(code)
		s.lastErr = code
	}
	e.scratch = append(append(e.scratch[:0], code...), text...)
	e.emit(s, codec.Error, e.scratch[:len(code)], e.scratch[len(code):])
}

// handle appends j's handle to dst.
func (e *Engine) handle(dst []byte, j *job) []byte { return e.handleID(dst, j.id) }

// handleID appends the handle of job id to dst.
func (e *Engine) handleID(dst []byte, id uint64) []byte {
	return strconv.AppendUint(append(dst, e.prefix...), id, 10)
}

// lookup finds the live job with handle h.
func (e *Engine) lookup(h []byte) *job {
	if len(h) <= len(e.prefix) || string(h[:len(e.prefix)]) != string(e.prefix) {
		return nil
	}
	var id uint64
	digits := h[len(e.prefix):]
	if len(digits) > maxCounterLen || (len(digits) > 1 && digits[0] == '0') {
		return nil
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil
		}
		id = id*10 + uint64(c-'0')
	}
	return e.jobs[id]
}

// timeDuration converts nanoseconds to a Duration.
func timeDuration(ns int64) time.Duration { return time.Duration(ns) }
