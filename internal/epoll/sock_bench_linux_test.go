package epoll

import (
	"syscall"
	"testing"
	"unsafe"
)

// BenchmarkSocketCalls writes 100 bytes to a loopback TCP socket and reads
// them back on the other end, with read(2)/write(2) and with the calls
// Read and Write make (recvfrom/sendto), so the file layer's share can
// be compared on a machine's kernel:
//
//	go test -run '^$' -bench SocketCalls -count 5 ./internal/epoll/
func BenchmarkSocketCalls(b *testing.B) {
	wfd, peer := tcpPair(b)
	rfd, err := DupConn(peer)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(rfd)
	msg := make([]byte, 100)
	buf := make([]byte, 4096)
	plain := func(nr uintptr, fd int, p []byte) (uintptr, syscall.Errno) {
		n, _, e := syscall.RawSyscall(nr, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		return n, e
	}
	b.Run("read-write", func(b *testing.B) {
		for b.Loop() {
			if n, e := plain(syscall.SYS_WRITE, wfd, msg); e != 0 || n != 100 {
				b.Fatal(n, e)
			}
			if n, e := plain(syscall.SYS_READ, rfd, buf); e != 0 || n != 100 {
				b.Fatal(n, e)
			}
		}
	})
	b.Run("recvfrom-sendto", func(b *testing.B) {
		for b.Loop() {
			if n, err := Write(wfd, msg); err != nil || n != 100 {
				b.Fatal(n, err)
			}
			if n, err := Read(rfd, buf); err != nil || n != 100 {
				b.Fatal(n, err)
			}
		}
	})
}
