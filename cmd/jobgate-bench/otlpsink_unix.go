//go:build unix

package main

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"syscall"
	"unsafe"
)

// On Unix the sink serves each connection with blocking reads and writes
// made as raw system calls, which the Go runtime does not see. With
// net/http and the runtime's poller, or with ordinary blocking system
// calls, the runtime woke its sysmon thread or a second thread around
// every request: about 200 µs per request of some 175 jobs' spans, most
// of it those wake-ups, on the CPUs the measured server needs. A
// goroutine blocked in a raw call holds its P and cannot be stopped, so
// the sink turns the garbage collector off (it allocates little beyond a
// reused buffer per connection) and keeps Ps to spare.

// sinkProcs is the sink's GOMAXPROCS: each connection's goroutine keeps a
// P while it waits in a raw read, and the accepting and signal goroutines
// need Ps left to run on, so the sink serves at most sinkMaxConns
// connections at once and closes any more as it accepts them. An idle P
// costs nothing.
const (
	sinkProcs    = 64
	sinkMaxConns = sinkProcs - 2
)

// prepareSinkRuntime turns the garbage collector off and sets GOMAXPROCS,
// before any connection is served: both stop the world, which a goroutine
// in a raw read would hold up.
func prepareSinkRuntime() {
	debug.SetGCPercent(-1)
	runtime.GOMAXPROCS(sinkProcs)
}

// newSinkConn takes c's descriptor over: it returns a duplicate in
// blocking mode and closes c.
func newSinkConn(c net.Conn) (sinkConn, error) {
	defer c.Close()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil, fmt.Errorf("not a TCP connection: %T", c)
	}
	f, err := tc.File()
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return fdConn(fd), nil
}

// fdConn reads and writes a blocking descriptor with raw system calls,
// which the runtime does not see. The preemption signals
// the runtime may send meanwhile interrupt a read, which then starts again.
type fdConn int

func (c fdConn) Read(p []byte) (int, error) {
	for {
		n, err := rawCall(syscall.SYS_READ, int(c), p)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c fdConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := rawCall(syscall.SYS_WRITE, int(c), p[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// rawCall makes the read or write system call trap on fd and p without
// telling the runtime.
func rawCall(trap uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, errno := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func (c fdConn) shutdown() { syscall.Shutdown(int(c), syscall.SHUT_RDWR) }

func (c fdConn) close() { syscall.Close(int(c)) }
