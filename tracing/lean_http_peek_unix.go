//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package tracing

import (
	"net"
	"syscall"
)

// canPeek says peekSocket can tell an idle connection the receiver closed,
// so the export goroutine may keep its own connection (connPoster).
const canPeek = true

// peekState is what a look at an idle connection's socket found.
type peekState int

const (
	peekQuiet  peekState = iota // open, nothing to read (or no way to tell)
	peekData                    // bytes waiting
	peekClosed                  // end of file or an error: the peer is gone
)

// peekSocket looks at conn's socket without reading from it or waiting.
// A deadline would not do: the runtime reports a deadline already past
// without asking the kernel.
func peekSocket(conn net.Conn) peekState {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return peekQuiet
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return peekClosed
	}
	state := peekQuiet
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		case rerr != nil || n == 0:
			state = peekClosed
		default:
			state = peekData
		}
		return true // never wait
	})
	if err != nil {
		return peekClosed
	}
	return state
}
