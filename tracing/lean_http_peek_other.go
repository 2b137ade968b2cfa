//go:build !unix

package tracing

import "net"

// peekState is what a look at an idle connection's socket found.
type peekState int

const (
	peekQuiet  peekState = iota // open, nothing to read (or no way to tell)
	peekData                    // bytes waiting
	peekClosed                  // end of file or an error: the peer is gone
)

// peekSocket cannot look at a socket here: a closed idle connection shows
// when the next request's reply does not come.
func peekSocket(net.Conn) peekState { return peekQuiet }
