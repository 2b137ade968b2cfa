//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"syscall"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/uring"
)

// bsLoopReadBuf is each loop connection's read buffer: a pipelined batch's
// INSERTED lines, or a good part of a large RESERVED body, in one read.
const bsLoopReadBuf = 32 << 10

// bsMessages are the encoded commands every connection of a run sends,
// built once and shared read-only by the loops.
type bsMessages struct {
	put     []byte // put with the run's body
	batch   []byte // -pipeline puts
	reserve []byte // reserve-with-timeout as the workload wants it
}

// bsLoopConn is one generator connection inside an event loop: the state
// machine of its role (next and reply), a read buffer the
// replies are parsed from, and the output the socket did not take yet.
// Everything in it is owned by its loop's goroutine.
type bsLoopConn struct {
	b     *beanstalkBench
	msg   *bsMessages
	w     *bsWorker
	start time.Time // the run's start; latencies are differences of time.Since(start)
	fd    int
	id    int32

	bsReplies

	pend    []byte // output the socket did not take yet
	queued  []byte // a message to write with the loop's batch, not copied (send)
	wantOut bool
	dirty   bool // in the loop's list of connections to write

	t0       time.Duration // when the unit of work in flight started
	await    int           // INSERTED replies the pipelined batch still waits for
	deleting bool          // a consumer's delete is in flight
	late     bool          // the unit in flight began after a timed run's stop
	loop     *bsLoop
	op       int    // the write's index in the loop's batch
	gone     bool   // ended and taken off the poller
	del      []byte // the delete command, rebuilt per job
	ended    bool
}

// runLoops drives the connections from b.loops event loops, each a
// goroutine with its own epoll: a connection is a state machine fed by
// replies parsed from its read buffer, written to without blocking. No
// goroutine switch per request, and one read per ready socket. It returns
// when every connection has finished its part of the run, or at the first
// error (a server that closes a connection, a reply the role does not
// expect).
func (b *beanstalkBench) runLoops(ws []*bsWorker, start time.Time) error {
	timeout := uint32(0)
	if b.workload == "cycle" {
		timeout = 1
	}
	put := wire.Command{Verb: wire.Put, Pri: 1024, TTR: 120, Body: ws[0].c.body}
	msg := &bsMessages{put: put.AppendTo(nil)}
	msg.batch = make([]byte, 0, len(msg.put)*b.pipeline)
	for range b.pipeline {
		msg.batch = append(msg.batch, msg.put...)
	}
	res := wire.Command{Verb: wire.ReserveWithTimeout, Timeout: timeout}
	msg.reserve = res.AppendTo(nil)

	shards := make([][]*bsLoopConn, min(b.loops, len(ws)))
	defer func() {
		for _, sh := range shards {
			for _, l := range sh {
				syscall.Close(l.fd)
			}
		}
	}()
	for i, w := range ws {
		fd, err := epoll.DupConn(w.c.nc.(syscall.Conn))
		if err != nil {
			return err
		}
		w.c.nc.Close() // the duplicate keeps the socket; see epoll.DupConn
		k := i % len(shards)
		l := &bsLoopConn{b: b, msg: msg, w: w, start: start, fd: fd, id: int32(len(shards[k])),
			bsReplies: bsReplies{in: make([]byte, bsLoopReadBuf)}}
		shards[k] = append(shards[k], l)
	}
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = b.loop(shards[i]); errs[i] != nil {
				b.abort.Store(true)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bsLoop is one event loop's state: its connections, and the batch its
// reads and then its writes go through, one system call for each (see
// internal/uring).
type bsLoop struct {
	p     *epoll.Poller
	io    *uring.Batch
	dirty []*bsLoopConn // connections with output queued in this batch
	reads [128]int      // per event, its read's index in io, or -1
}

// loop is one event loop over its share of the connections.
func (b *beanstalkBench) loop(conns []*bsLoopConn) error {
	p, err := epoll.New()
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.ParkWhenAlone(); err != nil { // one CPU: see internal/epoll/park_linux.go
		return err
	}
	lp := &bsLoop{p: p, io: uring.New()}
	defer lp.io.Close()
	live := len(conns)
	for _, l := range conns {
		l.loop = lp
		if err := p.Add(l.fd, epoll.In|epoll.Err, l.id); err != nil {
			return err
		}
		if err := l.next(); err != nil {
			return err
		}
	}
	if err := lp.writeQueued(); err != nil {
		return err
	}
	for _, l := range conns {
		if err := l.settle(p, &live); err != nil {
			return err
		}
	}
	var evs [128]syscall.EpollEvent
	for live > 0 {
		if b.abort.Load() {
			return nil // another loop failed and reports it
		}
		// The timeout only bounds how late an abort is noticed.
		n, err := p.Wait(evs[:], 100)
		if err != nil {
			return err
		}
		io := lp.io
		io.Reset()
		for i, ev := range evs[:n] {
			lp.reads[i] = -1
			if l := conns[ev.Fd]; !l.ended && ev.Events&(epoll.In|epoll.Err) != 0 {
				lp.reads[i] = io.Read(l.fd, l.in[l.end:])
			}
		}
		io.Run()
		for i, ev := range evs[:n] {
			l := conns[ev.Fd]
			if l.ended {
				continue
			}
			if k := lp.reads[i]; k >= 0 {
				if err := l.read(io.Result(k)); err != nil {
					return err
				}
			}
			if ev.Events&epoll.Out != 0 && len(l.pend) > 0 && !l.dirty {
				if err := l.flush(); err != nil {
					return err
				}
			}
		}
		if err := lp.writeQueued(); err != nil {
			return err
		}
		for _, ev := range evs[:n] {
			if err := conns[ev.Fd].settle(p, &live); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeQueued writes what the batch's replies made the connections send,
// with one batch; what a socket does not take waits for EPOLLOUT.
func (lp *bsLoop) writeQueued() error {
	io := lp.io
	io.Reset()
	for _, l := range lp.dirty {
		if l.queued != nil {
			l.op = io.Write(l.fd, l.queued)
		} else {
			l.op = io.Write(l.fd, l.pend)
		}
	}
	io.Run()
	for i, l := range lp.dirty {
		lp.dirty[i] = nil
		l.dirty = false
		n, err := io.Result(l.op)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if l.queued != nil {
			l.pend = append(l.pend, l.queued[n:]...)
			l.queued = nil
		} else {
			l.pend = l.pend[:copy(l.pend, l.pend[n:])]
		}
	}
	lp.dirty = lp.dirty[:0]
	return nil
}

// settle brings l's epoll interest up to date: EPOLLOUT while output
// waits, nothing once l has ended.
func (l *bsLoopConn) settle(p *epoll.Poller, live *int) error {
	if l.ended {
		if l.gone {
			return nil
		}
		l.gone = true
		*live--
		return p.Del(l.fd)
	}
	return watchOut(p, l.fd, l.id, len(l.pend) > 0, &l.wantOut)
}

// send queues m for the loop's batch of writes, after what is waiting
// already. m itself is kept only until that batch: it may be a shared
// message, or l.del.
func (l *bsLoopConn) send(m []byte) error {
	switch {
	case l.dirty && l.queued != nil: // a second message in one batch
		l.pend = append(append(l.pend, l.queued...), m...)
		l.queued = nil
	case l.dirty || len(l.pend) > 0:
		l.pend = append(l.pend, m...)
	default:
		l.queued = m
	}
	if !l.dirty {
		l.dirty = true
		l.loop.dirty = append(l.loop.dirty, l)
	}
	return nil
}

// flush writes what the socket did not take before.
func (l *bsLoopConn) flush() error {
	n, err := epoll.Write(l.fd, l.pend)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	l.pend = l.pend[:copy(l.pend, l.pend[n:])]
	return nil
}

// read handles what the loop's read of the socket brought (n bytes, or
// err): every whole reply the buffer then holds. Level-triggered epoll
// reports the socket again if more is waiting.
func (l *bsLoopConn) read(n int, err error) error {
	switch {
	case err == syscall.EAGAIN:
		return nil
	case err != nil:
		return fmt.Errorf("read: %w", err)
	case n == 0:
		return fmt.Errorf("the server closed the connection: %w", io.ErrUnexpectedEOF)
	}
	l.end += n
	return l.parse(l)
}

// now is the time since the run started.
func (l *bsLoopConn) now() time.Duration { return time.Since(l.start) }

// next starts l's next unit of work, or ends l when the run is over for
// it; the same decisions as the goroutine workers' loops.
func (l *bsLoopConn) next() error {
	b := l.b
	switch l.w.role {
	case rolePut:
		if !b.more(1) {
			l.ended = true
			return nil
		}
		l.t0 = l.now()
		return l.send(l.msg.put)
	case rolePipelined:
		if !b.more(int64(b.pipeline)) {
			l.ended = true
			return nil
		}
		l.t0, l.await = l.now(), b.pipeline
		return l.send(l.msg.batch)
	}
	if b.n > 0 && b.done.Load() >= b.n || b.n == 0 && b.stop.Load() && b.workload != "cycle" {
		// A timed reserve-delete leaves the rest to cleanup (or, with
		// -keep, in the server).
		l.ended = true
		return nil
	}
	l.t0, l.late = l.now(), b.afterStop()
	return l.send(l.msg.reserve)
}

// reply handles one reply: kind, with the job id of INSERTED and RESERVED.
func (l *bsLoopConn) reply(kind wire.ReplyKind, id uint64) error {
	b := l.b
	switch l.w.role {
	case rolePut:
		if kind != wire.Inserted {
			return fmt.Errorf("put: %s", kind)
		}
		l.w.hist.record(l.now() - l.t0)
		if b.workload != "cycle" {
			b.done.Add(1)
		}
		return l.next()
	case rolePipelined:
		if kind != wire.Inserted {
			return fmt.Errorf("put: %s", kind)
		}
		if l.await--; l.await > 0 {
			return nil
		}
		l.w.hist.record(l.now() - l.t0)
		b.done.Add(int64(b.pipeline))
		return l.next()
	}
	if l.deleting {
		if kind != wire.Deleted {
			return fmt.Errorf("delete: %s", kind)
		}
		l.deleting = false
		if !l.late {
			l.w.hist.record(l.now() - l.t0)
		}
		if b.done.Add(1) == b.n {
			b.endAt.Store(time.Now().UnixNano())
		}
		return l.next()
	}
	switch kind {
	case wire.TimedOut:
		if b.workload != "cycle" || b.stop.Load() || (b.n > 0 && b.claimed.Load() >= b.n) {
			l.ended = true
			return nil
		}
		return l.next()
	case wire.Reserved:
		l.deleting = true
		l.del = append(strconv.AppendUint(append(l.del[:0], "delete "...), id, 10), "\r\n"...)
		return l.send(l.del)
	}
	return fmt.Errorf("reserve: %s", kind)
}
