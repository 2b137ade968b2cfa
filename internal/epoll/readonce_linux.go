package epoll

import (
	"errors"
	"io"
	"syscall"
)

// ErrWouldBlock is what Once.Read returns once the socket has been read
// for the current readiness event: the frames buffered so far are all
// there is until epoll reports the socket again.
var ErrWouldBlock = errors.New("epoll: would block")

// Once is a non-blocking socket as a buffered decoder on an event loop
// reads it: at most once per readiness event. Reading only once keeps the
// loop fair between sockets and saves the read that would only return
// EAGAIN; level-triggered epoll reports the socket again if more is
// waiting. The loop either calls Arm when epoll reports the socket
// readable, and the decoder's reads (Read) make the one read, or makes
// the read itself, with others in one batch (internal/uring), and hands
// its result to Took. The zero value is a socket not reported readable.
type Once struct {
	armed bool  // reported readable, not read since
	err   error // what the loop's own read met, for Read to return
}

// Arm records that epoll reported the socket readable.
func (o *Once) Arm() { o.armed = true }

// Read reads fd into p once per readiness event. EAGAIN and a read already
// made are ErrWouldBlock; a read of 0 bytes is io.EOF; after Took, the end
// of input or error the loop's read met comes first, once.
func (o *Once) Read(fd int, p []byte) (int, error) {
	if err := o.err; err != nil {
		o.err = nil
		return 0, err
	}
	if !o.armed {
		return 0, ErrWouldBlock
	}
	o.armed = false
	n, err := Read(fd, p)
	switch {
	case err == syscall.EAGAIN:
		return 0, ErrWouldBlock
	case err != nil:
		return 0, err
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// Took takes the result of the read the loop made itself for this
// readiness event, into the room the decoder offered: it returns the
// bytes to hand the decoder, and keeps the end of input or an error for
// Read to return once those are decoded.
func (o *Once) Took(n int, err error) int {
	o.armed = false
	switch {
	case n > 0:
		return n
	case err == nil:
		o.err = io.EOF
	case err != syscall.EAGAIN:
		o.err = err
	}
	return 0
}
