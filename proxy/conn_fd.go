package proxy

import (
	"crypto/tls"
	"net"
	"syscall"

	"github.com/jobgate/jobgate/proxy/connlimit"
)

// tlsSocketFD returns the descriptor of the TCP socket under a TLS
// connection (through the connection limiter's wrapper, either side of
// the TLS layer), or -1. It is what the admin "workers" listing shows for
// the connection, as for a plain one, and what the gateway's merged
// listing tells its connections apart by. The socket stays the TLS
// connection's: only its number is read.
func tlsSocketFD(nc net.Conn) int {
	tlsSeen := false
	for range 8 { // a few layers at most; no cycle can hold us
		switch c := nc.(type) {
		case *connlimit.Conn:
			nc = c.NetConn()
		case *TLSConn:
			nc, tlsSeen = c.raw.Conn, true
		case *tls.Conn:
			nc, tlsSeen = c.NetConn(), true
		case *clampConn:
			nc = c.Conn
		case *net.TCPConn:
			if !tlsSeen {
				return -1 // a plain connection: newGearmanConn's own case
			}
			return rawFD(c)
		default:
			return -1
		}
	}
	return -1
}

// rawFD is the descriptor of c, or -1.
func rawFD(c syscall.Conn) int {
	fd := -1
	if rc, err := c.SyscallConn(); err == nil {
		_ = rc.Control(func(v uintptr) { fd = int(v) })
	}
	return fd
}
