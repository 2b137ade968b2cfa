// Package beanstalk is an in-process job engine with beanstalkd 1.12's
// semantics: tubes, priorities, delays, TTR with the one-second
// DEADLINE_SOON margin, bury/kick, pause-tube, and every stats field.
//
// The engine is pure. It takes decoded commands (codec/beanstalk) through a
// per-connection Session and returns replies; it never touches a socket,
// and it gets time only from an injected clock.Clock, so tests move time by
// hand. One engine-wide timer, armed for the earliest deadline of all (a
// delayed job, the end of a pause, a TTR, a DEADLINE_SOON margin, a reserve
// timeout), drives everything that happens with time; there is no timer or
// goroutine per job or per waiting reserve.
//
// Concurrency: one mutex, Engine.mu, guards all engine, tube, job and
// session state, like beanstalkd's single thread. Critical sections are
// short and never block, but for a journal append while the journal's
// queue is full (async.go). Lock order: mu comes before the clock's own lock
// (Now and AfterFunc are called with mu held) and before whatever a
// Session's notify callback takes; notify runs with mu held and must not
// call back into the engine. Timer callbacks take mu themselves.
//
// Persistence: with Config.Journal set (OpenJournal), New restores the
// journaled jobs and every acknowledged change is journaled first; see
// persist.go. Records are appended with mu held, which fixes their order,
// and waited for after mu is released, on the session's goroutine: Exec
// then blocks until its change is durable. Lock order: FileJournal.mu, then
// Engine.mu, then the journal's own lock (compaction calls the engine's
// snapshot with no journal lock held). Without a journal nothing of this
// runs.
package beanstalk

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jobgate/jobgate/jobserver/clock"
)

// Defaults of Config.
const (
	// DefaultMaxJobSize is beanstalkd's default -z: 65535 bytes.
	DefaultMaxJobSize = 1<<16 - 1
	// DefaultVersion is printed as "version" in stats when Config.Version
	// is empty.
	DefaultVersion = "1.12"
	// binlogMaxSize is what beanstalkd reports as binlog-max-size when it
	// runs without a binlog (its default -s).
	binlogMaxSize = 10 << 20
)

// safetyMargin is the last second of a TTR, during which a waiting reserve
// of the reserving session answers DEADLINE_SOON.
const safetyMargin = int64(time.Second)

// Config configures an Engine. The zero value is usable: real clock,
// beanstalkd's default job size limit, facts of the running process.
type Config struct {
	// Clock gives the time and runs the engine timer; nil means the system
	// clock.
	Clock clock.Clock
	// MaxJobSize is the largest job body in bytes; 0 means
	// DefaultMaxJobSize.
	MaxJobSize int
	// System supplies pid, hostname, rusage and the other process facts of
	// stats; nil means HostSystem(), the running process.
	System *System
	// Version is the "version" stats prints; empty means DefaultVersion.
	Version string
	// QuoteStrings quotes the string values of the stats YAML (tube names,
	// hostname, os, platform) as beanstalkd 1.13 does; 1.12 does not.
	QuoteStrings bool
	// Journal, when set, makes jobs durable (see persist.go): New restores
	// the jobs it holds, and put, release, bury, kick, kick-job and delete
	// answer only once their record is durable (INTERNAL_ERROR if the
	// journal fails). nil: nothing is journaled, at no cost.
	Journal Journal
}

// System is the process information stats prints. Tests inject a fixed one.
type System struct {
	// PID is the process id ("pid").
	PID int
	// Hostname is the uname node name ("hostname").
	Hostname string
	// OS is the uname version ("os").
	OS string
	// Platform is the uname machine ("platform").
	Platform string
	// InstanceID is a random hex id of this process ("id").
	InstanceID string
	// Rusage returns the user and system CPU time used so far; nil prints
	// zeros.
	Rusage func() (user, sys time.Duration)
}

// Engine is one beanstalkd-compatible job server. All methods are safe for
// concurrent use.
type Engine struct {
	mu sync.Mutex

	clock      clock.Clock
	start      time.Time
	maxJobSize int
	sys        System
	version    string
	quote      bool

	nextID      uint64
	jobs        jobTable
	tubes       map[string]*tube
	tubeList    []*tube // list-tubes order
	defaultTube *tube
	buriedSeq   int64
	draining    bool
	closed      bool

	// The timer heaps: tubes with delayed jobs or pauses, sessions with
	// reservations or timed waits. One clock timer fires at the earliest.
	tubeTimers timerHeap[*tube]
	sessTimers timerHeap[*Session]
	timer      clock.Timer
	timerAt    int64
	timerGen   uint64

	st stats

	// Persistence (persist.go); unused without a journal.
	jr        Journal
	startWall int64  // e.start as Unix ns: engine time to wall time
	rec, snap []byte // record buffers for appends and for snapshots
	restored  int    // jobs New restored
	async     asyncState
	qjr       QuietJournal // jr, when it is one
	quiet     bool         // ExecAsync is appending: quietly, with qjr

	obs Observer // job events for metrics; nil: none (observe.go)

	// Tracing (trace.go; traced jobs' creation contexts are in the job
	// table): the creation of the put being made; the hook.
	putCreation Creation
	putAt       int64 // the put's time on the trace clock, 0: none
	readyAt     int64 // putAt for the put's enqueue, 0: none
	thook       TraceHook
	tclock      TraceClock // thook, if it is one
}

// stats are the global counters of the "stats" command.
type stats struct {
	ready, urgent, reserved, delayed, buried uint64
	timeouts, totalJobs                      uint64
	cmd                                      [numVerbs]uint64
	conns, totalConns, producers, workers    int
	waiting                                  int
}

// New returns an engine with an empty "default" tube and, with
// Config.Journal, the journal's jobs restored. It fails only when restoring
// does (an unreadable record, a journal that cannot write).
func New(cfg Config) (*Engine, error) {
	e := &Engine{
		clock:      cfg.Clock,
		maxJobSize: cfg.MaxJobSize,
		version:    cfg.Version,
		quote:      cfg.QuoteStrings,
		nextID:     1,
		jobs:       newJobTable(),
		tubes:      make(map[string]*tube),
	}
	if e.clock == nil {
		e.clock = clock.Real{}
	}
	if e.maxJobSize <= 0 {
		e.maxJobSize = DefaultMaxJobSize
	}
	if cfg.System != nil {
		e.sys = *cfg.System
	} else {
		e.sys = HostSystem()
	}
	if e.version == "" {
		e.version = DefaultVersion
	}
	e.start = e.clock.Now()
	e.startWall = e.start.UnixNano()
	e.defaultTube = e.tubeLocked([]byte("default"))
	e.refLocked(e.defaultTube) // held for the engine's life
	if cfg.Journal != nil {
		e.jr = cfg.Journal
		e.qjr, _ = cfg.Journal.(QuietJournal)
		if err := e.restore(); err != nil {
			e.Close()
			return nil, fmt.Errorf("beanstalk: restore: %w", err)
		}
	}
	return e, nil
}

// MaxJobSize returns the largest job body the engine accepts.
func (e *Engine) MaxJobSize() int { return e.maxJobSize }

// SetDraining turns drain mode on or off. While draining, put answers
// DRAINING; everything else works (beanstalkd enters it on SIGUSR1).
func (e *Engine) SetDraining(on bool) {
	e.mu.Lock()
	e.draining = on
	e.mu.Unlock()
}

// Draining reports whether the engine is in drain mode.
func (e *Engine) Draining() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.draining
}

// Close stops the engine timer. Sessions keep working, but time-driven
// events (delays, TTR, timeouts, pauses) no longer fire.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	e.async.cond.Broadcast() // the completer ends once nothing is pending
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

// now returns the engine time: nanoseconds since New, on the monotonic
// reading of the clock so wall-clock steps do not move deadlines.
func (e *Engine) now() int64 { return int64(e.clock.Now().Sub(e.start)) }

// armLocked makes sure the timer fires no later than at. A timer already
// due sooner is kept; a timer that fires for nothing just re-arms, which is
// cheaper than re-arming on every reservation.
func (e *Engine) armLocked(at int64) {
	if e.closed || (e.timer != nil && e.timerAt <= at) {
		return
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timerGen++
	gen := e.timerGen
	e.timerAt = at
	e.timer = e.clock.AfterFunc(time.Duration(at-e.now()), func() { e.onTimer(gen) })
}

// onTimer runs what has come due and re-arms for the next deadline.
func (e *Engine) onTimer(gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gen == e.timerGen {
		e.timer = nil
	}
	e.tickLocked(e.now())
	next := int64(math.MaxInt64)
	if t, ok := e.tubeTimers.top(); ok {
		next = t.nextAt
	}
	if s, ok := e.sessTimers.top(); ok && s.tickAt < next {
		next = s.tickAt
	}
	if next != math.MaxInt64 {
		e.armLocked(next)
	}
}

// tickLocked does, in beanstalkd's order, everything due at now: delayed
// jobs become ready, pauses end, then sessions' TTRs, DEADLINE_SOON margins
// and reserve timeouts.
func (e *Engine) tickLocked(now int64) {
	for {
		t, ok := e.tubeTimers.top()
		if !ok || t.nextAt > now {
			break
		}
		for j := t.delay.top(); j != nil && j.deadline <= now; j = t.delay.top() {
			e.detachLocked(j)
			e.enqueueLocked(j, 0, now)
		}
		if t.paused && t.unpauseAt <= now {
			e.unpauseLocked(t, now)
		}
		e.retimeTubeLocked(t)
	}
	for {
		s, ok := e.sessTimers.top()
		if !ok || s.tickAt > now {
			break
		}
		s.timeoutLocked(now)
	}
}
