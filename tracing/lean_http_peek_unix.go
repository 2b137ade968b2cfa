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
	if _, ok := conn.(syscall.Conn); !ok {
		return peekQuiet // no way to tell
	}
	var b [1]byte
	switch n, ok := peekAvailable(conn, b[:]); {
	case !ok:
		return peekClosed
	case n > 0:
		return peekData
	}
	return peekQuiet
}

// peekAvailable copies into buf what conn's socket holds, without taking
// it or waiting. ok is false at the end of the stream or on an error.
func peekAvailable(conn net.Conn, buf []byte) (n int, ok bool) {
	sc, isSC := conn.(syscall.Conn)
	if !isSC || len(buf) == 0 {
		return 0, isSC
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	ok = true
	err = rc.Read(func(fd uintptr) bool {
		k, _, rerr := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		case rerr != nil || k == 0:
			ok = false
		default:
			n = k
		}
		return true // never wait
	})
	return n, ok && err == nil
}
