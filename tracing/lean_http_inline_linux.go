package tracing

import (
	"net"
	"syscall"
	"unsafe"
)

// canWriteNow says writeNow can write without waiting here.
const canWriteNow = true

// writeNow writes head and then body to conn's socket with one writev
// that does not wait: it returns how many bytes the socket took, 0 when
// it took none (full), and an error only when the connection failed.
func writeNow(conn net.Conn, head, body []byte) (int, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok || len(head) == 0 || len(body) == 0 {
		return 0, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var iov [2]syscall.Iovec
	iov[0].Base, iov[1].Base = &head[0], &body[0]
	iov[0].SetLen(len(head))
	iov[1].SetLen(len(body))
	var n int
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for {
			r, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), 2)
			switch e {
			case 0:
				n = int(r)
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
			default:
				werr = e
			}
			return true // never wait
		}
	})
	if err != nil {
		return 0, err
	}
	return n, werr
}
