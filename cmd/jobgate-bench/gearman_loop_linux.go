//go:build linux

package main

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/uring"
)

// loopConn is a generator connection inside an event loop.
type loopConn struct {
	c       benchConn
	client  bool
	fd      int
	rd      *codec.Reader
	once    epoll.Once // rd's reads: one per readiness event
	id      int32      // the epoll id
	pend    []byte     // output the socket did not take yet
	out     []byte     // the output being written by the batch
	op      int        // its write's index in the batch
	wantOut bool
	ended   bool // a client with nothing in flight, counted off
}

// Read reads the socket once per readiness event (epoll.Once).
func (l *loopConn) Read(p []byte) (int, error) { return l.once.Read(l.fd, p) }

// runLoops drives the connections from b.loops event loops, each a
// goroutine with its own epoll: one read per ready socket, one write per
// batch of requests, no goroutine switch per packet. It returns when every
// client has finished.
func (b *gearmanBench) runLoops(conns []benchConn) error {
	var remaining atomic.Int64
	shards := make([][]*loopConn, b.loops)
	defer func() {
		for _, sh := range shards {
			for _, l := range sh {
				syscall.Close(l.fd)
			}
		}
	}()
	for i, c := range conns {
		fd, err := epoll.DupConn(c.conn().(syscall.Conn))
		if err != nil {
			return err
		}
		c.conn().Close() // the duplicate keeps the socket; see epoll.DupConn
		l := &loopConn{c: c, fd: fd}
		_, l.client = c.(*benchClient)
		if l.client {
			remaining.Add(1)
		}
		l.rd = codec.NewReader(l, codec.Limits{})
		shards[i%b.loops] = append(shards[i%b.loops], l)
	}
	errs := make([]error, b.loops)
	var wg sync.WaitGroup
	for i := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.loop(shards[i], &remaining)
			if errs[i] != nil {
				b.stop.Store(true)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loop is one event loop over its share of the connections. It reads the
// sockets epoll reports with one batch, and writes what their packets
// made the connections send with another (internal/uring).
func (b *gearmanBench) loop(conns []*loopConn, remaining *atomic.Int64) error {
	p, err := epoll.New()
	if err != nil {
		return err
	}
	defer p.Close()
	batch := uring.New()
	defer batch.Close()
	for i, l := range conns {
		l.id = int32(i)
		if err := p.Add(l.fd, epoll.In|epoll.Err, l.id); err != nil {
			return err
		}
	}
	if err := b.writeAll(p, batch, conns, remaining); err != nil {
		return err
	}
	var evs [128]syscall.EpollEvent
	var reads [128]int
	ready := make([]*loopConn, 0, len(evs))
	for remaining.Load() > 0 {
		// The timeout lets a loop holding only workers notice the end.
		n, err := p.Wait(evs[:], 20)
		if err != nil {
			return err
		}
		batch.Reset()
		ready = ready[:0]
		for i, ev := range evs[:n] {
			l := conns[ev.Fd]
			ready = append(ready, l)
			reads[i] = -1
			if ev.Events&(epoll.In|epoll.Err) != 0 {
				l.once.Arm()
				if space := l.rd.Space(); len(space) > 0 {
					reads[i] = batch.Read(l.fd, space)
				}
			}
		}
		batch.Run()
		for i, l := range ready {
			if reads[i] < 0 {
				continue
			}
			if got := l.once.Took(batch.Result(reads[i])); got > 0 {
				l.rd.Filled(got)
			}
		}
		for i, ev := range evs[:n] {
			if ev.Events&(epoll.In|epoll.Err) == 0 {
				continue
			}
			l := ready[i]
			for {
				f, err := l.rd.ReadFrame()
				if err == epoll.ErrWouldBlock {
					break
				}
				if err != nil {
					if !l.client && b.stop.Load() {
						break // the run is over; a worker may be cut off
					}
					return err
				}
				if err := l.c.handle(&f); err != nil {
					return err
				}
			}
		}
		if err := b.writeAll(p, batch, ready, remaining); err != nil {
			return err
		}
	}
	return nil
}

// writeAll writes what each of conns queued, with one batch, keeping what
// a socket does not take for EPOLLOUT, and counts finished clients off.
func (b *gearmanBench) writeAll(p *epoll.Poller, batch *uring.Batch, conns []*loopConn, remaining *atomic.Int64) error {
	batch.Reset()
	for _, l := range conns {
		out := l.c.output()
		if len(l.pend) > 0 {
			l.pend = append(l.pend, out...)
			out = l.pend
		}
		l.out, l.op = out, batch.Write(l.fd, out)
	}
	batch.Run()
	for _, l := range conns {
		n, err := batch.Result(l.op)
		if err != nil {
			return err
		}
		if len(l.pend) > 0 {
			l.pend = l.pend[:copy(l.pend, l.pend[n:])]
		} else {
			l.pend = append(l.pend, l.out[n:]...)
		}
		l.out = nil
		if err := watchOut(p, l.fd, l.id, len(l.pend) > 0, &l.wantOut); err != nil {
			return err
		}
		if l.client && !l.ended && l.c.done() {
			l.ended = true
			remaining.Add(-1)
		}
	}
	return nil
}
