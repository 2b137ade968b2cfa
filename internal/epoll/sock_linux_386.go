//go:build linux && 386

package epoll

import (
	"syscall"
	"unsafe"
)

// On linux/386 the socket calls go through socketcall(2), which the
// syscall package does not expose as recvfrom and sendto: sockets are
// read and written with read(2) and write(2) there (sock_linux_sys.go
// says why the others use recvfrom and sendto).

// sysRead reads into b with one raw call; EINTR is the caller's to retry.
func sysRead(fd int, b []byte) (uintptr, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return n, e
}

// sysWrite writes b with one raw call; EINTR is the caller's to retry.
func sysWrite(fd int, b []byte) (uintptr, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return n, e
}
