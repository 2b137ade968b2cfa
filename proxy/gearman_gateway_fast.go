package proxy

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/routing"
)

// The submit fast path. Under pipelining a gateway connection sends the
// same function over and over to a session that is already open, and the
// general path (needsOpen, then submit) matched the function's rule twice,
// ordered the pool, and took the session lock four times per request. For
// a connection on the event loop, untraced, fastSubmit keeps the last
// function's backend order and session, checks only what can change
// between requests (the routing, the backends' availability, the session
// being alive), and queues the reply in fifo and in the backend's pending
// list in one critical section. Anything else (no route, a backend to
// dial, the local engine, a dead session) falls back to the general path,
// which answers it as before.

// gwFastRoute is the route of the last function a session submitted.
type gwFastRoute struct {
	rt    *gwRouting         // the routing it was computed under; nil: none
	fn    []byte             // the function, a copy
	order []*routing.Backend // the pool's backends, owner first (Pool.Order)
	stack [4]*routing.Backend
	bs    *gwBackend // the session last used; checked before each use
}

// fastSubmit sends SUBMIT_* p if its backend's session is open and reports
// whether it did; false leaves everything as it was for the general path.
// Called by Handle on the event loop, with s.pin set.
func (s *gwSession) fastSubmit(p *codec.Packet) bool {
	fn := p.Function()
	f := &s.fast
	if f.rt != s.pin || !bytes.Equal(f.fn, fn) {
		pool := s.pin.cfg.Rules.Match(fn)
		if pool == nil {
			f.rt = nil
			return false // the general path answers "no route"
		}
		f.rt = s.pin
		f.fn = append(f.fn[:0], fn...)
		f.order = pool.Order(fn, f.stack[:0])
		f.bs = nil
	}
	var b *routing.Backend
	for _, x := range f.order {
		if x.Available() {
			b = x
			break
		}
	}
	if b == nil || b.ID == routing.LocalID || b.Gearman == nil {
		return false
	}
	bs := f.bs
	if bs == nil || bs.b != b {
		if bs = s.find(b); bs == nil {
			if s.lineable(p.Type, b) {
				if l := s.liveLine(b); l != nil {
					s.mu.Lock()
					r := s.newReplyLocked(isForeground(p.Type))
					s.fifo.push(r)
					s.mu.Unlock()
					s.sendLine(l, p, r, s.rawOf(p))
					if h := gwFastHook.Load(); h != nil {
						(*h)()
					}
					return true
				}
			}
			return false // to be dialled (a session or a line): off the loop
		}
		f.bs = bs
	}
	bs.sendMu.Lock()
	s.mu.Lock()
	if bs.dead || s.closed {
		s.mu.Unlock()
		bs.sendMu.Unlock()
		f.bs = nil
		return false
	}
	r := s.newReplyLocked(isForeground(p.Type))
	s.fifo.push(r)
	bs.pending.push(r)
	s.mu.Unlock()
	rs, ok := bs.conn.(gwRawSender)
	raw := s.rawOf(p)
	var err error
	if ok && raw != nil {
		err = rs.SendRaw(p, raw) // the bytes as they came: no encoding
	} else {
		err = bs.conn.Send(p)
	}
	bs.sendMu.Unlock()
	if err == nil {
		bs.dirty.Store(true)
	} else {
		s.sent(bs, r, err)
		s.runActions() // a failed session moves its GRAB_JOBs on
	}
	if h := gwFastHook.Load(); h != nil {
		(*h)()
	}
	return true
}

// gwFastHook, for tests, runs for each request fastSubmit sends.
var gwFastHook atomic.Pointer[func()]

// isForeground reports whether SUBMIT_* type t starts a job whose client
// waits for its result.
func isForeground(t codec.Type) bool {
	switch t {
	case codec.SubmitJob, codec.SubmitJobHigh, codec.SubmitJobLow, codec.SubmitReduceJob:
		return true
	}
	return false
}

// gwFreeMax bounds a session's free replies: a pipeline window's worth.
const gwFreeMax = 64

// newReplyLocked returns a reply for fastSubmit, reused if one is free.
// Such a reply is referenced only by fifo and the backend's pending list:
// it has no trace, grab or parent, and is done only once taken off pending
// (deliver, forget), so once flushFIFOLocked pops it nothing holds it.
func (s *gwSession) newReplyLocked(fg bool) *gwReply {
	var r *gwReply
	if n := len(s.free); n > 0 {
		r = s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
	} else {
		r = &gwReply{}
	}
	r.fg, r.recycle = fg, true
	return r
}

// freeLocked keeps r, written and off every list, for newReplyLocked.
func (s *gwSession) freeLocked(r *gwReply) {
	if len(s.free) < gwFreeMax {
		*r = gwReply{}
		s.free = append(s.free, r)
	}
}

// gwRawSender is an upstream session that can forward a request's wire
// bytes as they came (upstream's loop session).
type gwRawSender interface {
	SendRaw(p *codec.Packet, raw []byte) error
}

// rawOf returns p's wire bytes as the connection's reader decoded them, or
// nil when p is not the packet it last returned: same type, same size, and
// every argument in place in those bytes (so an argument replaced by
// other bytes of the same length is not sent as it came).
func (s *gwSession) rawOf(p *codec.Packet) []byte {
	raw := s.c.rd.LastPacket()
	if len(raw) <= codec.HeaderSize || len(p.Args) == 0 || len(p.Args[0]) == 0 ||
		codec.Type(binary.BigEndian.Uint32(raw[4:])) != p.Type {
		return nil
	}
	off := codec.HeaderSize
	for _, a := range p.Args {
		if len(a) > 0 && (off+len(a) > len(raw) || &raw[off] != &a[0]) {
			return nil
		}
		off += len(a) + 1 // and the NUL after it
	}
	if off-1 != len(raw) {
		return nil
	}
	return raw
}
