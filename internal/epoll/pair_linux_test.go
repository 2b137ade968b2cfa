package epoll

import (
	"net"
	"syscall"
	"testing"
)

// tcpPair connects two loopback TCP sockets and returns the accepted
// end as a descriptor taken over with DupConn, and the dialling end.
// Both are closed when the test ends.
func tcpPair(tb testing.TB) (fd int, peer *net.TCPConn) {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	nc, err := l.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	fd, err = DupConn(nc.(*net.TCPConn))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	return fd, c.(*net.TCPConn)
}
