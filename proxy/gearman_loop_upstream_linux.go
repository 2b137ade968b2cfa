//go:build linux

package proxy

import (
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/routing"
)

// The event loop's share of gateway connections (gearman_gateway_loop.go):
// upstream sessions served on the loop, and connections whose request is
// being handled off the loop.
//
// Upstream sessions have epoll ids below wakeID (upID), slots in ups. The
// loop sweeps them for overdue replies every upSweep while any with an I/O
// timeout is open, which bounds how long epoll_wait sleeps; with none open
// it sleeps until something happens, as before.

// upSweep is how often the loop checks upstream sessions for I/O timeouts:
// a timeout fires up to this much after it is due.
const upSweep = 100 * time.Millisecond

// loopUpstreams is the loop's upstream state, embedded in gearmanLoop.
type loopUpstreams struct {
	ups    []routing.GearmanLoopConn // loop only; by upstream slot
	upFree []int32                   // loop only
	nups   int                       // loop only: live sessions in ups
	ntimed int                       // loop only: those with an I/O timeout (Timed)
	swept  time.Time                 // loop only: last sweep

	attaches []routing.GearmanLoopConn // guarded by gearmanLoop.mu: opened, to register
	resumes  []loopResume              // guarded by gearmanLoop.mu: connections to read again
}

// loopResume is a connection whose off-loop request is done, with the
// handler's error (non-nil: close it).
type loopResume struct {
	c   *gearmanConn
	err error
}

// upID is the epoll id of upstream slot i.
func upID(i int32) int32 { return wakeID - 1 - i }

// attach hands an upstream session opened off the loop to the loop.
func (l *gearmanLoop) attach(u routing.GearmanLoopConn) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		u.Close()
		u.Detach()
		return
	}
	l.attaches = append(l.attaches, u)
	l.mu.Unlock()
	l.wake.Signal()
}

// resume gives a connection whose request was handled off the loop back
// to the loop.
func (l *gearmanLoop) resume(c *gearmanConn, err error) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		return // the loop closed it
	}
	l.resumes = append(l.resumes, loopResume{c, err})
	l.mu.Unlock()
	l.wake.Signal()
}

// suspend stops reading c while a goroutine handles its request.
func (l *gearmanLoop) suspend(c *gearmanConn) {
	c.paused = true
	c.watch.setFlag(watchPaused, true) // neither idle nor reading a request
	l.poll.Del(c.fd)
	c.wantOut = false
	if c.flusher != nil {
		c.flusher.flushBackends() // the requests before this one
	}
}

// upstreamWork registers the upstream sessions opened and resumes the
// connections handed back since the last batch.
func (l *gearmanLoop) upstreamWork() {
	l.mu.Lock()
	attaches, resumes := l.attaches, l.resumes
	l.attaches, l.resumes = nil, nil
	l.mu.Unlock()
	for _, u := range attaches {
		var i int32
		if n := len(l.upFree); n > 0 {
			i = l.upFree[n-1]
			l.upFree = l.upFree[:n-1]
		} else {
			i = int32(len(l.ups))
			l.ups = append(l.ups, nil)
		}
		if u.Attach(l.poll, upID(i)) != nil {
			l.upFree = append(l.upFree, i)
			continue
		}
		l.ups[i] = u
		l.nups++
		if u.Timed() {
			l.ntimed++
		}
	}
	for _, r := range resumes {
		c := r.c
		if c.closed {
			continue
		}
		c.paused = false
		c.watch.setFlag(watchPaused, false)
		if c.srv.metrics != nil {
			c.countFrame(&codec.Frame{Kind: codec.KindPacket, Packet: codec.Packet{Type: c.held}}, r.err)
		}
		if err := l.poll.Add(c.fd, epoll.In|epoll.Err, c.slot); err != nil || r.err != nil || c.closeReq.Load() {
			l.close(c)
			continue
		}
		l.write(c) // output that waited for room while it was out of the poller
		if !c.closed {
			l.read(c) // the frames still buffered, and what came meanwhile
		}
	}
}

// upReady handles events on upstream session id.
func (l *gearmanLoop) upReady(id int32, events uint32) {
	i := wakeID - 1 - id
	if int(i) >= len(l.ups) {
		return
	}
	u := l.ups[i]
	if u == nil || u.Ready(events) {
		return
	}
	l.ups[i] = nil
	l.upFree = append(l.upFree, i)
	l.nups--
	if u.Timed() {
		l.ntimed--
	}
}

// waitMsec is how long epoll_wait may sleep: until the next sweep while
// upstream sessions with an I/O timeout are open.
func (l *gearmanLoop) waitMsec() int {
	if l.ntimed == 0 {
		return -1
	}
	return int(upSweep / time.Millisecond)
}

// sweep fails upstream sessions whose replies or writes are overdue; their
// sockets are shut down, so the next epoll_wait reports them.
func (l *gearmanLoop) sweep() {
	if l.ntimed == 0 {
		return
	}
	now := time.Now()
	if now.Sub(l.swept) < upSweep {
		return
	}
	l.swept = now
	for _, u := range l.ups {
		if u != nil {
			u.Expire(now)
		}
	}
}

// stopUpstreams releases every upstream socket; the sessions were closed
// with their client connections.
func (l *gearmanLoop) stopUpstreams() {
	l.mu.Lock()
	attaches := l.attaches
	l.attaches = nil
	l.mu.Unlock()
	for _, u := range append(attaches, l.ups...) {
		if u != nil {
			u.Close()
			u.Detach()
		}
	}
	l.ups, l.nups, l.ntimed = nil, 0, 0
}
