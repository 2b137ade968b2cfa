package epoll

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestReadWriteNotSocket: Read and Write fall back to read(2) and write(2)
// on a descriptor that is not a socket (recvfrom and sendto fail there
// with ENOTSOCK).
func TestReadWriteNotSocket(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	buf := make([]byte, 8)
	if _, err := Read(fds[0], buf); err != syscall.EAGAIN {
		t.Fatalf("read of an empty pipe: %v, want EAGAIN", err)
	}
	if n, err := Write(fds[1], []byte("abc")); n != 3 || err != nil {
		t.Fatalf("write to a pipe: %d %v", n, err)
	}
	if n, err := Read(fds[0], buf); n != 3 || err != nil || string(buf[:n]) != "abc" {
		t.Fatalf("read from a pipe: %q %v", buf[:n], err)
	}
}

// TestWriteClosedPeerNoSignal: a write to a socket whose peer has gone
// fails with an error, and raises no SIGPIPE (sendto with MSG_NOSIGNAL).
func TestWriteClosedPeerNoSignal(t *testing.T) {
	if runtime.GOARCH == "386" {
		t.Skip("linux/386 writes sockets with write(2) (sock_linux_386.go)")
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGPIPE)
	defer signal.Stop(sigs)

	fd, peer := tcpPair(t)
	// An RST from the peer (linger 0) breaks the connection at once.
	peer.SetLinger(0)
	peer.Close()

	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := Write(fd, []byte("x"))
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes to a reset connection kept succeeding")
		}
		time.Sleep(time.Millisecond) // let the RST arrive
	}
	// One more write on the broken socket: EPIPE, which write(2) would
	// have signalled.
	if _, err := Write(fd, []byte("x")); err == nil {
		t.Fatal("write after the error succeeded")
	}
	select {
	case s := <-sigs:
		t.Fatalf("got %v writing to a closed peer", s)
	case <-time.After(50 * time.Millisecond):
	}
}
