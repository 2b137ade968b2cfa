package epoll

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// Blocking on the runtime's netpoller when the process has one P.
//
// Wait blocks in epoll_pwait through syscall.Syscall6. With GOMAXPROCS 1
// (one CPU, e.g. under taskset or a one-CPU container) that is costly: no
// other P is idle, so sysmon takes the blocked loop's P after 20 µs,
// hands it to another thread to poll the network, and when the wait
// returns the loop's thread finds no P and parks while that thread is
// woken to run it. On one CPU this churn (sysmon's naps, futex wakeups,
// thread switches) took a quarter of the Beanstalk server's CPU
// (docs/BENCHMARKS.md, "The 4×4 cycle on one CPU"). Parked on the
// netpoller instead, the loop goroutine lets its thread block in the
// runtime's own epoll_pwait with the P released, sysmon sleeps, and the
// same thread runs the loop again when the epoll descriptor turns
// readable. With more Ps an idle one exists and sysmon leaves the system
// call alone (until the 10 ms time slice ends: park_always_linux.go);
// there the registration itself costs: every time the epoll
// descriptor turns readable, an idle thread blocked in the runtime's
// epoll_pwait wakes for nothing (a third more server CPU per job on two
// CPUs). So a poller parks only if GOMAXPROCS is 1 when the loop starts,
// unless told to park always (park_always_linux.go: with many busy
// connections parking shortens the latency tail).
// (GOMAXPROCS changes later only by hand or with the container's CPU
// limit; a poller keeps what it chose.)

// parker is a Poller's netpoller registration (ParkWhenAlone).
type parker struct {
	f  *os.File
	rc syscall.RawConn
	// try is tryWait bound once, so that a wait allocates nothing.
	try      func(uintptr) bool
	evs      []syscall.EpollEvent
	n        uintptr
	e        syscall.Errno
	deadline bool
}

// ParkWhenAlone makes Wait block by parking on the runtime's netpoller
// rather than in a system call if GOMAXPROCS is 1 now (see the top of
// this file); otherwise it does nothing. Call it before the first Wait.
// The netpoller watches a duplicate of the poller's descriptor, held by an
// os.File that Close closes too. If the runtime cannot watch it, Wait
// keeps blocking in the system call.
func (p *Poller) ParkWhenAlone() error {
	if runtime.GOMAXPROCS(0) != 1 {
		return nil
	}
	return p.Park()
}

// Park makes Wait block by parking on the runtime's netpoller rather than
// in a system call, whatever GOMAXPROCS is (see park_always_linux.go for
// when that pays with more than one P). Call it before the first Wait.
// As with ParkWhenAlone, if the runtime cannot watch the descriptor, Wait
// keeps blocking in the system call.
func (p *Poller) Park() error {
	if p.park != nil {
		return nil
	}
	dup, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(p.fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return e
	}
	// The runtime's poller takes only non-blocking descriptors; epoll_pwait
	// itself ignores the flag and blocks for its timeout.
	if err := syscall.SetNonblock(int(dup), true); err != nil {
		syscall.Close(int(dup))
		return err
	}
	f := os.NewFile(dup, "epoll")
	// A descriptor the netpoller did not take has no deadlines: parking
	// on it would fail at once, every time.
	if f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	k := &parker{f: f, rc: rc}
	k.try = k.tryWait
	p.park = k
	return nil
}

// rawWait polls epoll instance fd for ready events without blocking.
func rawWait(fd int, evs []syscall.EpollEvent) (uintptr, syscall.Errno) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(fd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	return n, e
}

// tryWait is the netpoller's read attempt: a raw poll that does not block;
// false sends the goroutine back to wait until the descriptor is readable.
func (k *parker) tryWait(fd uintptr) bool {
	k.n, k.e = rawWait(int(fd), k.evs)
	return k.e != 0 || k.n > 0
}

// wait parks until an event is ready or msec milliseconds have passed
// (-1: no limit).
func (k *parker) wait(evs []syscall.EpollEvent, msec int) (int, error) {
	// Registered (ParkWhenAlone checked), the file takes deadlines.
	if msec >= 0 {
		_ = k.f.SetReadDeadline(time.Now().Add(time.Duration(msec) * time.Millisecond))
		k.deadline = true
	} else if k.deadline {
		_ = k.f.SetReadDeadline(time.Time{})
		k.deadline = false
	}
	k.evs = evs
	err := k.rc.Read(k.try)
	k.evs = nil
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return ret(k.n, k.e)
}
