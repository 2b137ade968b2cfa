package epoll

import (
	"errors"
	"io"
	"syscall"
)

// ErrWouldBlock is what ReadOnce returns once the socket has been read for
// the current readiness event: the frames buffered so far are all there is
// until epoll reports the socket again.
var ErrWouldBlock = errors.New("epoll: would block")

// ReadOnce is the Read of a non-blocking socket as a buffered decoder on an
// event loop sees it. It reads at most once per readiness event: *armed is
// set by the loop when epoll reports fd readable and cleared here. Reading
// only once keeps the loop fair between sockets and saves the read that
// would only return EAGAIN; level-triggered epoll reports the socket again
// if more is waiting. EAGAIN and a read already made are ErrWouldBlock; a
// read of 0 bytes is io.EOF.
func ReadOnce(fd int, armed *bool, p []byte) (int, error) {
	if !*armed {
		return 0, ErrWouldBlock
	}
	*armed = false
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
