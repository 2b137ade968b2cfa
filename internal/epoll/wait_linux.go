package epoll

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// waitMode picks how Wait blocks (experiment; set with -ldflags -X):
// "" raw poll then a blocking Syscall6; "netpoll" park on the runtime's
// netpoller; "spin" a few raw polls before the blocking call.
var waitMode string

// waiter is the Poller's blocking half.
type waiter struct {
	f  *os.File
	rc syscall.RawConn
	// try is w.tryWait bound once, so that a Wait allocates nothing.
	try      func(uintptr) bool
	evs      []syscall.EpollEvent
	n        uintptr
	e        syscall.Errno
	deadline bool
}

func (w *waiter) init(fd int) error {
	if waitMode != "netpoll" {
		return nil
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return err
	}
	w.f = os.NewFile(uintptr(fd), "epoll")
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	w.rc = rc
	w.try = w.tryWait
	return nil
}

func (w *waiter) close(fd int) error {
	if w.f != nil {
		return w.f.Close()
	}
	return syscall.Close(fd)
}

// Wait fills evs with ready events and returns how many. It first polls
// without blocking, as a raw call: under load something is usually ready,
// and the runtime need not hear of a system call that does not wait. Only
// when nothing is ready does it block, for at most msec milliseconds (-1:
// no limit), through the runtime so that the P can serve other goroutines
// meanwhile. (Blocking raw for up to a millisecond was tried: it cost more
// CPU per job, not less.) EINTR returns 0.
func (p *Poller) Wait(evs []syscall.EpollEvent, msec int) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	n, e := rawWait(p.fd, evs, 0)
	if e != 0 || n > 0 || msec == 0 {
		return ret(n, e)
	}
	switch waitMode {
	case "netpoll":
		return p.w.park(evs, msec)
	case "spin":
		for i := 0; i < 8; i++ {
			runtime.Gosched()
			n, e = rawWait(p.fd, evs, 0)
			if e != 0 || n > 0 {
				return ret(n, e)
			}
		}
	}
	ptr := uintptr(unsafe.Pointer(&evs[0]))
	n, _, e = syscall.Syscall6(syscall.SYS_EPOLL_PWAIT, uintptr(p.fd), ptr, uintptr(len(evs)), uintptr(msec), 0, 0)
	return ret(n, e)
}

func rawWait(fd int, evs []syscall.EpollEvent, msec int) (uintptr, syscall.Errno) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(fd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), uintptr(msec), 0, 0)
	return n, e
}

func (w *waiter) tryWait(fd uintptr) bool {
	w.n, w.e = rawWait(int(fd), w.evs, 0)
	return w.e != 0 || w.n > 0
}

func (w *waiter) park(evs []syscall.EpollEvent, msec int) (int, error) {
	if msec > 0 {
		w.f.SetReadDeadline(time.Now().Add(time.Duration(msec) * time.Millisecond))
		w.deadline = true
	} else if w.deadline {
		w.f.SetReadDeadline(time.Time{})
		w.deadline = false
	}
	w.evs = evs
	err := w.rc.Read(w.try)
	w.evs = nil
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return ret(w.n, w.e)
}
