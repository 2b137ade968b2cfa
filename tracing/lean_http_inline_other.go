//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package tracing

import "net"

// writeNow cannot write without waiting here; inline sends never begin
// (canPeek is false, so the sink has no connection of its own).
func writeNow(net.Conn, []byte, []byte) (int, error) { return 0, nil }

// peekAvailable cannot look at a socket here.
func peekAvailable(net.Conn, []byte) (int, bool) { return 0, false }
