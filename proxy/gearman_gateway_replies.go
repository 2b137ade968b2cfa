package proxy

import (
	"bytes"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/routing"
)

// The way back: backends' packets delivered to a gateway client, and the
// replies put back in request order (gwSession).

// push appends a reply to fifo.
func (s *gwSession) push(r *gwReply) {
	s.mu.Lock()
	s.fifo.push(r)
	s.mu.Unlock()
}

// answer queues a reply the gateway gives itself.
func (s *gwSession) answer(t codec.Type, args ...[]byte) {
	s.mu.Lock()
	s.fifo.push(&gwReply{out: codec.AppendPacket(nil, codec.Res, t, args...), done: true})
	s.flushFIFOLocked()
	s.mu.Unlock()
}

// flushFIFOLocked writes the replies at the head of fifo that are done.
func (s *gwSession) flushFIFOLocked() {
	for s.fifo.len() > 0 && s.fifo.front().done {
		r := s.fifo.pop()
		if !s.closed && len(r.out) > 0 {
			s.c.WriteText(r.out)
		}
		if r.recycle {
			s.freeLocked(r)
		}
	}
}

// afterAsync runs the queued actions and wakes the server's writers, for
// goroutines other than the connection's read loop.
func (s *gwSession) afterAsync() {
	s.runActions()
	s.gw.srv.flushDirty()
}

// runActions runs what deliveries queued, until none is left.
func (s *gwSession) runActions() {
	for {
		s.mu.Lock()
		acts := s.actions
		s.actions = nil
		s.mu.Unlock()
		if len(acts) == 0 {
			return
		}
		for _, a := range acts {
			a()
		}
	}
}

// deliver handles one packet from backend session bs.
func (s *gwSession) deliver(bs *gwBackend, p *codec.Packet) {
	s.mu.Lock()
	if s.closed || bs.dead {
		s.mu.Unlock()
		return
	}
	switch p.Type {
	case codec.Noop:
		// One NOOP per sleep, whichever backend sends it first.
		if s.sleeping {
			s.sleeping = false
			s.c.WritePacket(p)
		}
	case codec.JobCreated, codec.NoJob, codec.JobAssign, codec.JobAssignUniq, codec.JobAssignAll,
		codec.StatusRes, codec.StatusResUnique, codec.EchoRes, codec.OptionRes, codec.Error:
		if bs.pending.len() == 0 || (p.Type == codec.Error && bytes.Equal(p.Arg(0), []byte(codec.CodeJobNotFound))) {
			// The answer to a WORK_* for a job the backend does not know:
			// no reply was expected for it.
			s.writeLocked(bs.b, p)
			break
		}
		r := bs.pending.pop()
		switch {
		case r.discard:
		case r.grab != nil && p.Type == codec.NoJob:
			s.actions = append(s.actions, func() { s.tryGrab(r) })
		case r.parent != nil:
			s.partLocked(r, p)
		default:
			if r.trace == nil && s.fifo.len() > 0 && s.fifo.front() == r {
				// Next in request order: written now, as flushFIFOLocked
				// would below, with no buffer of its own. (A traced reply
				// may still be rewritten: replyLocked.)
				s.writeLocked(bs.b, p)
			} else {
				r.out = s.encodeLocked(nil, bs.b, p)
			}
			if s.gw.trace != nil {
				s.gw.trace.replyLocked(s, r, bs.b, p)
			}
			if r.fg && p.Type == codec.JobCreated && bs.local == nil {
				if bs.foreground == nil {
					bs.foreground = map[string]struct{}{}
				}
				bs.foreground[string(p.Args[0])] = struct{}{}
			}
			r.done = true
		}
	case codec.WorkComplete, codec.WorkFail, codec.WorkException:
		if p.Type == codec.WorkFail && len(p.Args) == 1 {
			// gearmand 1.1 sends the WORK_FAIL it makes of a WORK_EXCEPTION
			// (for a client without the exceptions option) with a NUL after
			// the handle. Perl's Gearman::Client then knows no such handle
			// and dies; send the handle alone, as the local engine does.
			p.Args[0] = bytes.TrimSuffix(p.Args[0], []byte{0})
		}
		delete(bs.foreground, string(p.Arg(0)))
		s.writeLocked(bs.b, p)
	default:
		s.writeLocked(bs.b, p)
	}
	s.flushFIFOLocked()
	s.mu.Unlock()
	// An upstream session's reader calls afterAsync once its batch is
	// delivered (GearmanEvents.Idle).
}

// writeLocked writes an async packet from b to the client now.
// It encodes straight into the connection's output, as WriteText would
// append it, saving a copy per reply.
func (s *gwSession) writeLocked(b *routing.Backend, p *codec.Packet) {
	c := s.c
	c.mu.Lock()
	wasEmpty := len(c.out) == 0
	c.out = s.encodeLocked(c.out, b, p)
	c.queued(wasEmpty)
}

// encodeLocked appends p to dst with its job handle, if it has one,
// rewritten to the client's form for backend b.
func (s *gwSession) encodeLocked(dst []byte, b *routing.Backend, p *codec.Packet) []byte {
	if p.Type.ArgIndex(codec.FieldHandle) != 0 || len(p.Args) == 0 {
		return codec.AppendPacket(dst, codec.Res, p.Type, p.Args...)
	}
	h, err := s.gw.rt().cfg.Handles.Append(s.handleBuf[:0], b, p.Args[0])
	if err != nil {
		return codec.AppendPacket(dst, codec.Res, codec.Error, []byte(codec.CodeQueueError),
			[]byte("jobgate: "+err.Error()))
	}
	args := append(s.scratch[:0], h)
	args = append(args, p.Args[1:]...)
	dst = codec.AppendPacket(dst, codec.Res, p.Type, args...)
	clear(s.scratch[:])
	return dst
}

// partLocked records one backend's answer to a GET_STATUS_UNIQUE (nil: it
// failed). The parent reply, preset to "unknown", takes the first answer
// that knows the job and is done when every backend has answered.
func (s *gwSession) partLocked(r *gwReply, p *codec.Packet) {
	par := r.parent
	par.need--
	if p != nil && !par.known && p.Type == codec.StatusResUnique && bytes.Equal(p.Arg(1), []byte("1")) {
		par.out = codec.AppendPacket(par.out[:0], codec.Res, p.Type, p.Args...)
		par.known = true
	}
	if par.need == 0 {
		par.done = true
	}
}
