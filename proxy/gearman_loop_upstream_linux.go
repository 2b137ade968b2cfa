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
	ups    loopSlots[routing.GearmanLoopConn] // loop only
	nups   int                                // loop only: live sessions in ups
	ntimed int                                // loop only: those with an I/O timeout (Timed)
	swept  time.Time                          // loop only: last sweep

	throttled []*gearmanConn // loop only: not read while their upstreams catch up (throttle)

	upw upWrites // loop only: sessions with requests for the batch's write (deferFlush)

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
	l.pause(c)
	if c.flusher != nil {
		c.flusher.flushBackends() // the requests before this one
	}
}

// pause takes c out of the poller: it is not read until unpause.
func (l *gearmanLoop) pause(c *gearmanConn) {
	c.paused = true
	c.watch.setFlag(watchPaused, true) // neither idle nor reading a request
	l.poll.Del(c.fd)
	c.wantOut = false
}

// unpause reads c again after pause; false if it was closed instead,
// because of err (its off-loop request's) or otherwise.
func (l *gearmanLoop) unpause(c *gearmanConn, err error) bool {
	c.paused = false
	c.watch.setFlag(watchPaused, false)
	if e := l.poll.Add(c.fd, epoll.In|epoll.Err, c.slot); e != nil || err != nil || c.closeReq.Load() {
		l.close(c)
		return false
	}
	return true
}

// backlogHigh and backlogLow, fractions of the write buffer limit (the
// bound of an upstream session's waiting output), are where a client is
// paused while an upstream session of its has more waiting, and resumed.
func backlogHigh(limit int) int { return limit / 2 }
func backlogLow(limit int) int  { return limit / 4 }

// throttle pauses c, whose requests were all handled and sent, when one of
// its upstream sessions has more output waiting than backlogHigh; it is
// read again once they are under backlogLow (unthrottle).
func (l *gearmanLoop) throttle(c *gearmanConn) {
	gs, ok := c.flusher.(*gwSession)
	limit := l.srv.maxOutput()
	if !ok || limit <= 0 || !gs.backlogged(backlogHigh(limit)) {
		return
	}
	l.pause(c)
	l.throttled = append(l.throttled, c)
}

// unthrottle reads again the throttled connections whose upstreams caught
// up (or whose sessions ended).
func (l *gearmanLoop) unthrottle() {
	if len(l.throttled) == 0 {
		return
	}
	limit := backlogLow(l.srv.maxOutput())
	n := 0
	for _, c := range l.throttled {
		switch {
		case c.closed:
		case c.flusher.(*gwSession).backlogged(limit):
			l.throttled[n] = c
			n++
		case l.unpause(c, nil):
			l.write(c) // output that waited for room while it was out of the poller
			if !c.closed {
				l.read(c) // what came meanwhile; may throttle it again
			}
		}
	}
	clear(l.throttled[n:])
	l.throttled = l.throttled[:n]
}

// upstreamWork registers the upstream sessions opened and resumes the
// connections handed back since the last batch.
func (l *gearmanLoop) upstreamWork() {
	l.mu.Lock()
	attaches, resumes := l.attaches, l.resumes
	l.attaches, l.resumes = nil, nil
	l.mu.Unlock()
	for _, u := range attaches {
		i := l.ups.reserve()
		if u.Attach(l.poll, upID(i)) != nil {
			l.ups.release(i)
			continue
		}
		l.ups.items[i] = u
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
		if c.srv.metrics != nil {
			c.countFrame(&codec.Frame{Kind: codec.KindPacket, Packet: codec.Packet{Type: c.held}}, r.err)
		}
		if !l.unpause(c, r.err) {
			continue
		}
		l.write(c) // output that waited for room while it was out of the poller
		if !c.closed {
			l.read(c) // the frames still buffered, and what came meanwhile
		}
	}
}

// deferFlush lists u for the batch's write (flush); a connection's
// requests to its upstreams go out with the batch, in one system call
// with the replies.
func (l *gearmanLoop) deferFlush(u routing.LoopSession) { l.upw.add(u) }

// upReady handles events on upstream session id.
func (l *gearmanLoop) upReady(id int32, events uint32) {
	i := wakeID - 1 - id
	if int(i) >= len(l.ups.items) {
		return
	}
	u := l.ups.items[i]
	if u == nil || u.Ready(events) {
		return
	}
	l.ups.release(i)
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
	for _, u := range l.ups.items {
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
	for _, u := range append(attaches, l.ups.items...) {
		if u != nil {
			u.Close()
			u.Detach()
		}
	}
	l.ups, l.nups, l.ntimed = loopSlots[routing.GearmanLoopConn]{}, 0, 0
}
