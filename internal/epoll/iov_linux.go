package epoll

import (
	"syscall"
	"unsafe"
)

// Readv reads from a non-blocking fd into a and then b with one raw readv,
// so a loop can read the rest of a large body straight into the body's
// own buffer and what follows it into its input buffer. It returns the
// bytes read in all; EAGAIN is an error, as with Read, and EINTR is
// retried. Either slice may be empty.
func Readv(fd int, a, b []byte) (int, error) {
	var iov [2]syscall.Iovec
	k := 0
	for _, p := range [2][]byte{a, b} {
		if len(p) > 0 {
			iov[k].Base = &p[0]
			iov[k].SetLen(len(p))
			k++
		}
	}
	if k == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// MaxIov is the most buffers Writev takes at once (the kernel's IOV_MAX).
const MaxIov = 1024

// Writev writes the buffers of iov, in order, to a non-blocking fd with one
// raw writev, so that a large reply body can go out from where it lies
// instead of being copied after its line. It returns how much the kernel
// took; EAGAIN is (0, nil), as with Write. iov holds at most MaxIov
// buffers, each of them non-empty.
func Writev(fd int, iov []syscall.Iovec) (int, error) {
	if len(iov) == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, nil
		}
		return 0, e
	}
}
