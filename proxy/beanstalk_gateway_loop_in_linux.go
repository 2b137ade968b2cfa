//go:build linux

package proxy

import (
	"syscall"

	"github.com/jobgate/jobgate/internal/epoll"
)

// The gateway loop's input: each batch's reads, of clients and upstream
// sessions alike, and what a client's read brought.

// readAll reads every socket of the first n events that reported input,
// clients' and upstream sessions' alike, with one batch; the event pass
// then serves what each read brought.
func (l *bgwLoop) readAll(n int) {
	l.io.Reset()
	for i := 0; i < n; i++ {
		ev := &l.evs[i]
		l.reads[i] = -1
		if ev.Events&(epoll.In|epoll.Err) == 0 || ev.Fd == wakeID {
			continue
		}
		if ev.Fd < 0 {
			if k := wakeID - 1 - ev.Fd; int(k) < len(l.ups.items) {
				if u := l.ups.items[k].u; u != nil {
					u.ReadInto(l.io)
				}
			}
			continue
		}
		if b := l.slots.items[ev.Fd]; b != nil && !b.off && b.events&epoll.In != 0 {
			l.reads[i] = int32(l.io.Read(b.fd, b.room()))
		}
	}
	l.io.Run()
	for i := 0; i < n; i++ {
		if k := l.reads[i]; k >= 0 {
			got, _ := l.io.Result(int(k))
			if got > 0 {
				b := l.slots.items[l.evs[i].Fd]
				b.in = b.in[:len(b.in)+got]
			}
		}
	}
}

// event handles one readiness report of b's socket, whose read (at index
// read of l.io, or -1) readAll made.
func (l *bgwLoop) event(b *bgwLoopConn, ev uint32, read int32) {
	if b.off {
		return
	}
	if ev&epoll.Out != 0 {
		l.write(b)
	}
	if b.closed || b.off {
		return
	}
	if read >= 0 {
		n, err := l.io.Result(int(read))
		l.readDone(b, n, err)
		return
	}
	if ev&(syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
		b.dead = true
		l.close(b)
	}
}

// room makes room in b.in for a read of at least what the decoder needs
// (readRoom), and returns it.
func (b *bgwLoopConn) room() []byte {
	b.in, b.ir = readRoom(b.in, b.ir, b.dec)
	return b.in[len(b.in):cap(b.in)]
}

// readDone serves what a read of n bytes brought (readAll appended them to
// b.in), or handles its error or end of input.
func (l *bgwLoop) readDone(b *bgwLoopConn, n int, err error) {
	switch {
	case err == syscall.EAGAIN:
		return
	case err != nil:
		b.dead = true
		l.close(b)
		return
	case n == 0:
		b.eof = true
		b.s.cancelWaits()
	}
	l.serve(b)
}
