//go:build linux && !386

package epoll

import (
	"syscall"
	"unsafe"
)

// Sockets are read with recvfrom(2) and written with sendto(2) rather than
// read(2) and write(2). On a socket the kernel then goes straight to the
// socket layer: read and write first cross the file layer (fdget_pos,
// rw_verify_area, the security hook, the iov_iter wrappers): 4.5% of a
// profile of the gateway proxying Gearman jobs, against 1.9% for the
// recv and send paths haproxy takes (docs/BENCHMARKS.md, "The gateway's
// system calls against haproxy's").
// A descriptor that is not a socket (ENOTSOCK: a pipe, a file), or a
// kernel without the direct socket calls (ENOSYS: s390x before 4.3), gets the
// plain call, so Read and Write keep working on any descriptor.

// sysRead reads into b with one raw call; EINTR is the caller's to retry.
func sysRead(fd int, b []byte) (uintptr, syscall.Errno) {
	p := uintptr(unsafe.Pointer(&b[0]))
	n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), p, uintptr(len(b)), 0, 0, 0)
	if e == syscall.ENOTSOCK || e == syscall.ENOSYS {
		n, _, e = syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), p, uintptr(len(b)))
	}
	return n, e
}

// sysWrite writes b with one raw call; EINTR is the caller's to retry.
// MSG_NOSIGNAL: a peer gone makes it fail with EPIPE, as Write reports,
// without a SIGPIPE for the runtime to field first.
func sysWrite(fd int, b []byte) (uintptr, syscall.Errno) {
	p := uintptr(unsafe.Pointer(&b[0]))
	n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), p, uintptr(len(b)), syscall.MSG_NOSIGNAL, 0, 0)
	if e == syscall.ENOTSOCK || e == syscall.ENOSYS {
		n, _, e = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), p, uintptr(len(b)))
	}
	return n, e
}
