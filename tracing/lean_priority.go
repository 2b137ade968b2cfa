package tracing

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// The export goroutine's scheduling class, an opt-in
// (JOBGATE_TRACING_EXPORT_PRIORITY=idle). On a small machine the export
// goroutine's bursts (encoding and posting a batch of 512 spans takes a
// few hundred µs) take a CPU from the servers' event loops: the threads
// the loop's replies wake (clients, workers) then land on the loop's CPU
// and preempt it in the middle of a batch of writes. With the opt-in, on
// Linux, the export goroutine runs on a thread of its own in the
// SCHED_IDLE class: the kernel counts a CPU that runs only it as idle
// when it places a woken thread, and preempts it at once for anything
// else. It still gets every CPU nobody else wants. It is not the default
// because on a machine busy with other work it is starved until the
// queue is half full, and then costs more than it saves (docs/BENCHMARKS.md,
// "Tracing", round 5).
//
// An idle-class thread can starve while the machine is saturated, and a
// starved thread may hold one of the Go runtime's processors. Two things
// bound that: when the queue is half full the data path raises the thread
// back to the normal class (one system call, only at that mark; the
// thread lowers itself again once it has caught up), and Shutdown and
// ForceFlush raise it first. Raising a thread out of SCHED_IDLE needs
// CAP_SYS_NICE or RLIMIT_NICE 20 (systemd: LimitNICE=20); a process that
// cannot does not lower the thread at all (exportPriorityAllowed probes
// it once).

// exportPriorityEnv names the variable that chooses the export
// goroutine's class: "normal" (the default) or "idle" (where allowed).
const exportPriorityEnv = "JOBGATE_TRACING_EXPORT_PRIORITY"

// exportPriority switches the export goroutine's thread between the idle
// and the normal class. The zero value does nothing until bind.
type exportPriority struct {
	// tid is the export goroutine's thread, once bound; 0 before, or when
	// the class is never changed.
	tid atomic.Int32
	// low is set while the thread is in the idle class; the data path
	// reads it on every enqueue past the raise mark, so it is atomic.
	low atomic.Bool
	// mu orders the class changes with their system calls, so low never
	// disagrees with the thread's class for longer than one of them.
	mu sync.Mutex
	// raised counts the raises, for the tests.
	raised atomic.Uint64
}

// exportIdleWanted reports whether the environment asks for the idle
// class.
func exportIdleWanted() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(exportPriorityEnv)))
	return v == "idle"
}

// bind locks the calling goroutine (the export goroutine) to its thread
// and lowers the thread to the idle class, when wanted and allowed. The
// goroutine must never unlock the thread: when it ends, the runtime then
// ends the thread, so no other goroutine ever runs in the idle class.
func (e *exportPriority) bind() {
	if !exportIdleWanted() || !exportPriorityAllowed() {
		return
	}
	runtime.LockOSThread()
	e.tid.Store(int32(threadID()))
	e.lower()
}

// lower puts the bound thread in the idle class; the export goroutine
// calls it when it has caught up with the queue.
func (e *exportPriority) lower() {
	tid := e.tid.Load()
	if tid == 0 || e.low.Load() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.low.Load() && setThreadIdle(int(tid), true) == nil {
		e.low.Store(true)
	}
}

// raise puts the bound thread back in the normal class, from any
// goroutine. It costs an atomic load unless the thread is idle-class.
func (e *exportPriority) raise() {
	if !e.low.Load() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.low.Load() && setThreadIdle(int(e.tid.Load()), false) == nil {
		e.low.Store(false)
		e.raised.Add(1)
	}
}

var (
	exportPriorityOnce sync.Once
	exportPriorityOK   bool
)

// exportPriorityAllowed reports whether this process may both lower a
// thread to the idle class and raise it back. It tries once, on a thread
// of its own that ends with the probing goroutine.
func exportPriorityAllowed() bool {
	exportPriorityOnce.Do(func() {
		done := make(chan bool)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with us
			tid := threadID()
			ok := setThreadIdle(tid, true) == nil && setThreadIdle(tid, false) == nil
			done <- ok
		}()
		exportPriorityOK = <-done
	})
	return exportPriorityOK
}
