package epoll

import (
	"errors"
	"io"
	"syscall"
	"testing"
	"time"
)

// TestOnce: one read per readiness event; what a loop's own read met
// (Took) comes back from Read once, after the bytes it brought.
func TestOnce(t *testing.T) {
	fd, peer := tcpPair(t)
	var o Once
	buf := make([]byte, 64)
	if _, err := o.Read(fd, buf); err != ErrWouldBlock {
		t.Fatalf("not armed: %v, want ErrWouldBlock", err)
	}
	peer.Write([]byte("abc"))
	o.Arm()
	deadline := time.Now().Add(5 * time.Second)
	var n int
	var err error
	for {
		n, err = o.Read(fd, buf)
		if err != ErrWouldBlock || time.Now().After(deadline) {
			break
		}
		o.Arm() // the bytes were not there yet
	}
	if n != 3 || err != nil {
		t.Fatalf("armed read: %d, %v", n, err)
	}
	if _, err := o.Read(fd, buf); err != ErrWouldBlock {
		t.Fatalf("second read of one event: %v, want ErrWouldBlock", err)
	}

	// The loop's own reads.
	o.Arm()
	if got := o.Took(5, nil); got != 5 {
		t.Fatalf("Took(5): %d", got)
	}
	if _, err := o.Read(fd, buf); err != ErrWouldBlock {
		t.Fatalf("after Took: %v, want ErrWouldBlock (the event is read)", err)
	}
	if got := o.Took(0, syscall.EAGAIN); got != 0 {
		t.Fatalf("Took(EAGAIN): %d", got)
	}
	if _, err := o.Read(fd, buf); err != ErrWouldBlock {
		t.Fatalf("after EAGAIN: %v, want ErrWouldBlock", err)
	}
	for _, tc := range []struct {
		err, want error
	}{{nil, io.EOF}, {syscall.ECONNRESET, syscall.ECONNRESET}} {
		o.Took(0, tc.err)
		if _, err := o.Read(fd, buf); !errors.Is(err, tc.want) {
			t.Fatalf("after Took(0, %v): %v, want %v", tc.err, err, tc.want)
		}
		if _, err := o.Read(fd, buf); err != ErrWouldBlock {
			t.Fatalf("the kept error came back twice: %v", err)
		}
	}
}
