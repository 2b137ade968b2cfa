//go:build linux

package main

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/epoll"
)

// loopConn is a generator connection inside an event loop.
type loopConn struct {
	c       benchConn
	client  bool
	fd      int
	rd      *codec.Reader
	canRead bool
	pend    []byte // output the socket did not take yet
	wantOut bool
	ended   bool // a client with nothing in flight, counted off
}

// Read reads the socket once per readiness event (epoll.ReadOnce).
func (l *loopConn) Read(p []byte) (int, error) { return epoll.ReadOnce(l.fd, &l.canRead, p) }

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

// loop is one event loop over its share of the connections.
func (b *gearmanBench) loop(conns []*loopConn, remaining *atomic.Int64) error {
	p, err := epoll.New()
	if err != nil {
		return err
	}
	defer p.Close()
	for i, l := range conns {
		if err := p.Add(l.fd, epoll.In|epoll.Err, int32(i)); err != nil {
			return err
		}
		if err := b.send(p, l, int32(i), remaining); err != nil {
			return err
		}
	}
	var evs [128]syscall.EpollEvent
	for remaining.Load() > 0 {
		// The timeout lets a loop holding only workers notice the end.
		n, err := p.Wait(evs[:], 20)
		if err != nil {
			return err
		}
		for _, ev := range evs[:n] {
			l := conns[ev.Fd]
			if ev.Events&(epoll.In|epoll.Err) != 0 {
				l.canRead = true
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
			if err := b.send(p, l, ev.Fd, remaining); err != nil {
				return err
			}
		}
	}
	return nil
}

// send writes what l queued, keeping what the socket does not take for
// EPOLLOUT, and counts a finished client off.
func (b *gearmanBench) send(p *epoll.Poller, l *loopConn, id int32, remaining *atomic.Int64) error {
	if out := l.c.output(); len(out) > 0 {
		if len(l.pend) == 0 {
			n, err := epoll.Write(l.fd, out)
			if err != nil {
				return err
			}
			out = out[n:]
		}
		l.pend = append(l.pend, out...)
	} else if len(l.pend) > 0 {
		n, err := epoll.Write(l.fd, l.pend)
		if err != nil {
			return err
		}
		l.pend = l.pend[:copy(l.pend, l.pend[n:])]
	}
	if want := len(l.pend) > 0; want != l.wantOut {
		ev := uint32(epoll.In | epoll.Err)
		if want {
			ev |= epoll.Out
		}
		if err := p.Mod(l.fd, ev, id); err != nil {
			return err
		}
		l.wantOut = want
	}
	if l.client && !l.ended && l.c.done() {
		l.ended = true
		remaining.Add(-1)
	}
	return nil
}
