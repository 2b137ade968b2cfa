//go:build unix

package proxy

import "syscall"

// writeNow writes what the socket takes without waiting: one write(2)
// through the runtime's poller (so it stays in step with its other
// operations on the descriptor), never parking.
func (c *gearmanConn) writeNow(buf []byte) (int, error) {
	var n int
	var werr error
	err := c.raw.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), buf)
			if werr != syscall.EINTR {
				return true
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if werr == syscall.EAGAIN {
		return max(n, 0), nil
	}
	if werr != nil {
		return 0, werr
	}
	return n, nil
}
