// Package epoll is a thin, allocation-free wrapper over Linux epoll for
// single-goroutine event loops (the Gearman server's and the load
// generator's). Such a loop serves many sockets without a goroutine per
// socket: no scheduler wakeups, no parking, no thread handoffs between a
// read and the writes it causes, which on a small machine cost more CPU
// than the protocol work itself.
//
// Reads and writes here are raw system calls: they must be made on
// non-blocking descriptors, where they never wait, so the runtime need not
// be told (entersyscall/exitsyscall, and sysmon handing the P to another
// thread when a loopback write runs long, are what they save). Only Wait
// may block, and when it does it goes through the runtime like any
// blocking call.
package epoll

import (
	"syscall"
	"time"
	"unsafe"
)

// Event flags, re-exported so callers need not import syscall.
const (
	In  = syscall.EPOLLIN
	Out = syscall.EPOLLOUT
	Err = syscall.EPOLLERR | syscall.EPOLLHUP | syscall.EPOLLRDHUP
)

// Poller is one epoll instance. Its methods may be called from any
// goroutine, but Wait from one only.
type Poller struct {
	fd    int
	park  *parker // set by Park or ParkWhenAlone (park_linux.go)
	yield yielder // Wait's periodic yield (yield_linux.go)
	// spinDur is how long Wait may poll before it blocks, gate whether
	// it does (spin_linux.go); spun counts how those spins ended.
	spinDur time.Duration
	gate    spinGate
	spun    spinStats
}

// New opens an epoll instance.
func New() (*Poller, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &Poller{fd: fd}, nil
}

// Close closes the epoll instance. A Wait blocked in the system call is
// not woken (the kernel keeps the instance until that wait returns); a
// parked one is, with an error. So the loop closes its own poller, or
// wakes itself first with an EventFD.
func (p *Poller) Close() error {
	if p.park != nil {
		p.park.f.Close()
	}
	return syscall.Close(p.fd)
}

// Add watches fd for events (level-triggered); id comes back with them.
func (p *Poller) Add(fd int, events uint32, id int32) error {
	ev := syscall.EpollEvent{Events: events, Fd: id}
	return syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_ADD, fd, &ev)
}

// Mod changes the events watched for fd.
func (p *Poller) Mod(fd int, events uint32, id int32) error {
	ev := syscall.EpollEvent{Events: events, Fd: id}
	return syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_MOD, fd, &ev)
}

// Del stops watching fd.
func (p *Poller) Del(fd int) error {
	var ev syscall.EpollEvent
	return syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_DEL, fd, &ev)
}

// Wait fills evs with ready events and returns how many. It first polls
// without blocking, as a raw call: under load something is usually ready,
// and the runtime need not hear of a system call that does not wait. Only
// when nothing is ready does it block, for at most msec milliseconds (-1:
// no limit), through the runtime so that the P can serve other goroutines
// meanwhile. (Blocking raw for up to a millisecond was tried: it cost more
// CPU per job, not less; so did, with more than one P, parking on the
// runtime's netpoller and a few raw polls before blocking:
// docs/BENCHMARKS.md, "How the loop waits"; parking does shorten the
// latency tail when waits are rare: "Tail latency on two CPUs".) A poller
// that Park or ParkWhenAlone set up parks on the netpoller instead.
// Every YieldEvery it first lets the goroutine yield (yield_linux.go).
// EINTR returns 0.
func (p *Poller) Wait(evs []syscall.EpollEvent, msec int) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	p.yield.maybeYield()
	ptr := uintptr(unsafe.Pointer(&evs[0]))
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(p.fd), ptr, uintptr(len(evs)), 0, 0, 0)
	if e != 0 || n > 0 || msec == 0 {
		return ret(n, e)
	}
	// learn: this wait blocks without spinning, and the gate counts the
	// events it brings (a wait after a spin tells nothing of how they come).
	learn := p.spinDur > 0
	if learn && p.gate.open() {
		learn = false
		var spent time.Duration
		if n, e, spent = p.spin(evs, p.spinBudget(msec)); e != 0 || n > 0 {
			return ret(n, e)
		}
		if msec > 0 {
			if msec -= int(spent / time.Millisecond); msec <= 0 {
				return 0, nil
			}
		}
	}
	if p.park != nil {
		got, err := p.park.wait(evs, msec)
		if learn {
			p.gate.observe(got)
		}
		return got, err
	}
	n, _, e = syscall.Syscall6(syscall.SYS_EPOLL_PWAIT, uintptr(p.fd), ptr, uintptr(len(evs)), uintptr(msec), 0, 0)
	if learn && e == 0 {
		p.gate.observe(int(n))
	}
	return ret(n, e)
}

func ret(n uintptr, e syscall.Errno) (int, error) {
	switch e {
	case 0:
		return int(n), nil
	case syscall.EINTR:
		return 0, nil
	}
	return 0, e
}

// Read reads from a non-blocking fd with one raw system call (recvfrom on
// a socket: sock_linux_sys.go). EAGAIN is returned as an error like any
// other; EINTR is retried.
func Read(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, e := sysRead(fd, b)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// Write writes to a non-blocking fd with one raw system call (sendto on a
// socket: sock_linux_sys.go) and returns how much the kernel took; EAGAIN is
// (0, nil) when nothing was taken.
func Write(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, e := sysWrite(fd, b)
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, nil
		}
		return 0, e
	}
}

// EventFD is a counter descriptor other goroutines write to wake a loop
// blocked in Wait.
type EventFD struct{ fd int }

// NewEventFD opens a non-blocking eventfd.
func NewEventFD() (*EventFD, error) {
	fd, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return nil, e
	}
	return &EventFD{fd: int(fd)}, nil
}

// FD returns the descriptor, to Add to a Poller.
func (e *EventFD) FD() int { return e.fd }

// Signal wakes the loop; signals before it drains coalesce.
func (e *EventFD) Signal() {
	one := [8]byte{1}
	syscall.RawSyscall(syscall.SYS_WRITE, uintptr(e.fd), uintptr(unsafe.Pointer(&one[0])), 8)
}

// Drain resets the counter after a wakeup.
func (e *EventFD) Drain() {
	var b [8]byte
	syscall.RawSyscall(syscall.SYS_READ, uintptr(e.fd), uintptr(unsafe.Pointer(&b[0])), 8)
}

// Close closes the descriptor.
func (e *EventFD) Close() error { return syscall.Close(e.fd) }

// DupConn takes a connection's socket out of the Go runtime's poller: it
// returns a duplicate of the descriptor (non-blocking, close-on-exec) after
// which the caller closes the original net.Conn, leaving the socket open
// for the event loop alone. c is the conn (a *net.TCPConn, for one).
func DupConn(c syscall.Conn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	var derr error
	err = rc.Control(func(fd uintptr) {
		r, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			derr = e
			return
		}
		nfd = int(r)
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return -1, err
	}
	if err := syscall.SetNonblock(nfd, true); err != nil {
		syscall.Close(nfd)
		return -1, err
	}
	return nfd, nil
}
