package epoll

import (
	"syscall"
	"testing"
)

// TestReadvWritev: Writev sends its buffers in order, Readv fills its
// first buffer before its second, and both report EAGAIN as Read and
// Write do.
func TestReadvWritev(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	a, b := make([]byte, 5), make([]byte, 16)
	if _, err := Readv(fds[1], a, b); err != syscall.EAGAIN {
		t.Fatalf("readv with nothing sent: %v", err)
	}
	parts := [][]byte{[]byte("RESERVED 1 5\r\n"), []byte("hello"), []byte("\r\n")}
	iov := make([]syscall.Iovec, len(parts))
	for i, p := range parts {
		iov[i].Base = &p[0]
		iov[i].SetLen(len(p))
	}
	if n, err := Writev(fds[0], iov); n != 21 || err != nil {
		t.Fatalf("writev: %d %v", n, err)
	}
	if n, err := Readv(fds[1], a, b); n != 21 || err != nil || string(a) != "RESER" || string(b[:16]) != "VED 1 5\r\nhello\r\n" {
		t.Fatalf("readv: %d %v %q %q", n, err, a, b)
	}
	if n, err := Readv(fds[1], nil, b[:4]); err != syscall.EAGAIN || n != 0 {
		t.Fatalf("readv into the second buffer alone, nothing sent: %d %v", n, err)
	}
	syscall.Write(fds[0], []byte("xyz"))
	if n, err := Readv(fds[1], nil, b); n != 3 || err != nil || string(b[:3]) != "xyz" {
		t.Fatalf("readv into the second buffer alone: %d %v %q", n, err, b[:3])
	}
	// Fill the socket: Writev then takes nothing and says so without an error.
	big := make([]byte, 1<<20)
	iov = iov[:1]
	iov[0].Base = &big[0]
	iov[0].SetLen(len(big))
	for {
		n, err := Writev(fds[0], iov)
		if err != nil {
			t.Fatalf("writev to a full socket: %v", err)
		}
		if n == 0 {
			break
		}
	}
}
