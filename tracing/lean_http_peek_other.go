//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package tracing

import "net"

// peekState is what a look at an idle connection's socket found.
type peekState int

const (
	peekQuiet  peekState = iota // open, nothing to read (or no way to tell)
	peekData                    // bytes waiting
	peekClosed                  // end of file or an error: the peer is gone
)

// canPeek is false: here peekSocket cannot look at a socket, a closed idle
// connection would show only when a batch's reply does not come, and
// that batch would be lost; net/http, which notices while idle, posts.
const canPeek = false

// peekSocket cannot look at a socket here.
func peekSocket(net.Conn) peekState { return peekQuiet }

// peekAvailable cannot look at a socket here.
func peekAvailable(net.Conn, []byte) (int, bool) { return 0, false }
