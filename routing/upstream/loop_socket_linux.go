package upstream

import (
	"context"
	"net"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/routing"
)

// loopSocket is the socket side of an upstream session served by an event
// loop (Gearman and Beanstalk alike): the descriptor, its registration,
// and the output waiting for room in it. The session's lock guards it.
type loopSocket struct {
	fd      int            // -1 once released
	poll    routing.Poller // nil until Attach
	id      int32
	out     []byte    // requests not yet taken by the socket
	wantOut bool      // waiting for room: EPOLLOUT is (or, once attached, will be) watched
	stalled time.Time // when output last waited for room without progress; zero: not waiting

	// A write queued in the loop's batch (takeOut): the bytes taken from
	// out, the batch and the write's index in it. While writing, out
	// holds only what was queued since, and no other write is made.
	wbuf    []byte
	spare   []byte // out's other buffer
	wb      routing.IOBatch
	wop     int
	writing bool
}

// loopEvents are the events a loop session always waits for.
const loopEvents = uint32(epoll.In | epoll.Err)

// writeOut makes one non-blocking write of the queued output and watches
// EPOLLOUT while some is left. An error is the socket's or the poller's:
// the session has failed.
func (k *loopSocket) writeOut() error {
	if k.writing {
		return nil // wroteOut writes it, behind what the batch writes
	}
	n, err := epoll.Write(k.fd, k.out)
	if err != nil {
		return err
	}
	k.out = k.out[:copy(k.out, k.out[n:])]
	return k.afterWrite(n)
}

// takeOut queues in b one write of the output waiting, unless there is
// none, it waits for room, or a write is queued already; wroteOut takes
// its result.
func (k *loopSocket) takeOut(b routing.IOBatch) bool {
	if k.writing || k.wantOut || len(k.out) == 0 || k.fd < 0 {
		return false
	}
	k.wbuf, k.out, k.spare = k.out, k.spare[:0], nil
	k.wb, k.wop, k.writing = b, b.Write(k.fd, k.wbuf), true
	return true
}

// wroteOut takes the result of takeOut's write: what the socket did not
// take goes back ahead of what was queued meanwhile; that is written at
// once if the socket took all, or waits for room. An error is the
// socket's or the poller's: the session has failed.
func (k *loopSocket) wroteOut() error {
	if !k.writing {
		return nil
	}
	n, err := k.wb.Result(k.wop)
	buf := k.wbuf
	k.wbuf, k.wb, k.writing = nil, nil, false
	if err != nil {
		return err
	}
	if n < len(buf) {
		buf = append(buf[:copy(buf, buf[n:])], k.out...)
		k.out, k.spare = buf, k.out[:0]
		return k.afterWrite(n)
	}
	if cap(buf) <= 1<<20 {
		k.spare = buf[:0]
	}
	if len(k.out) > 0 {
		return k.writeOut()
	}
	return k.afterWrite(n)
}

// afterWrite follows a write that took n bytes and left k.out: EPOLLOUT is
// watched while some is left.
func (k *loopSocket) afterWrite(n int) error {
	if len(k.out) == 0 {
		k.stalled = time.Time{}
		if cap(k.out) > 1<<20 {
			k.out = nil // drop a buffer a burst grew
		}
		return k.setWantOut(false)
	}
	if n > 0 || k.stalled.IsZero() {
		k.stalled = time.Now()
	}
	return k.setWantOut(true)
}

// setWantOut watches EPOLLOUT while output waits for room.
func (k *loopSocket) setWantOut(want bool) error {
	if want == k.wantOut {
		return nil
	}
	k.wantOut = want
	if k.poll == nil {
		return nil // attach registers what wantOut says
	}
	ev := loopEvents
	if want {
		ev |= epoll.Out
	}
	return k.poll.Mod(k.fd, ev, k.id)
}

// attach registers the socket with p under id.
func (k *loopSocket) attach(p routing.Poller, id int32) error {
	ev := loopEvents
	if k.wantOut {
		ev |= epoll.Out
	}
	err := p.Add(k.fd, ev, id)
	if err == nil {
		k.poll, k.id = p, id
	}
	return err
}

// shutdown makes the socket readable for the loop (EOF, HUP) and tells the
// server the connection is over, without freeing the descriptor the loop
// may be using.
func (k *loopSocket) shutdown() {
	if k.fd >= 0 {
		_ = syscall.Shutdown(k.fd, syscall.SHUT_RDWR)
	}
}

// release removes the socket from the poller and closes it.
func (k *loopSocket) release() {
	if k.fd < 0 {
		return
	}
	if k.poll != nil {
		_ = k.poll.Del(k.fd)
	}
	_ = syscall.Close(k.fd)
	k.fd = -1
	k.out, k.spare = nil, nil
}

// dialLoop connects as dial does and returns a duplicate of the socket's
// descriptor, outside the Go runtime's poller, for an event loop to serve.
// routing.ErrNoLoop: the connection is not plain TCP (TLS).
func (c *Config) dialLoop(ctx context.Context) (int, error) {
	if c.TLS != nil {
		return -1, routing.ErrNoLoop
	}
	nc, err := c.dial(ctx)
	if err != nil {
		return -1, err
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return -1, routing.ErrNoLoop
	}
	fd, err := epoll.DupConn(tc)
	nc.Close() // the duplicate keeps the socket open
	if err != nil {
		return -1, &routing.TransportError{Backend: c.Addr, Op: "dial", Err: err}
	}
	return fd, nil
}
