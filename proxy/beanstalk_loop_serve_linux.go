//go:build linux

package proxy

import (
	"syscall"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/uring"
	"github.com/jobgate/jobgate/proxy/auth"
)

// queueRead queues in io one read of b's socket: the rest of a put body
// the decoder holds in its own buffer and what follows it into b.in with
// one readv, else into b.in, grown to take at least what the decoder
// needs. gotRead takes its result, before anything else touches b's
// input; readDone then serves what it brought. A hang-up while a reserve
// waits cancels it: the client gets TIMED_OUT, as from beanstalkd, and
// the commands it sent before closing are still served, as on a
// connection goroutine (beanstalkConn.await).
func (b *bloopConn) queueRead(io *uring.Batch) int {
	if room := b.dec.Room(); len(room) > 0 {
		b.bodyRoom()
		return io.Readv(b.fd, room, b.in[len(b.in):cap(b.in)])
	}
	b.in, b.ir = readRoom(b.in, b.ir, b.dec)
	return io.Read(b.fd, b.in[len(b.in):cap(b.in)])
}

// readRoom makes room behind in's unread bytes, in[ir:], for a read of
// at least what dec needs to finish its command (bloopReadMin at
// least): the unread bytes move to the front, and the buffer doubles if
// that is not enough. It returns the buffer and the new ir.
func readRoom(in []byte, ir int, dec *wire.Decoder) ([]byte, int) {
	pending := len(in) - ir
	want := max(bloopReadMin, dec.Need(in[ir:])-pending)
	if cap(in)-len(in) >= want {
		return in, ir
	}
	if ir > 0 {
		in, ir = in[:copy(in[:cap(in)], in[ir:])], 0
	}
	if cap(in)-len(in) < want {
		buf := make([]byte, pending, max(2*cap(in), pending+want))
		copy(buf, in)
		in = buf
	}
	return in, ir
}

// gotRead takes the n bytes the read queueRead queued brought: first
// what the body the decoder reads still lacks, the rest into b.in.
func (b *bloopConn) gotRead(n int) {
	if n <= 0 {
		return
	}
	if room := b.dec.Room(); len(room) > 0 {
		k := min(n, len(room))
		b.dec.Filled(k)
		n -= k
	}
	b.in = b.in[:len(b.in)+n]
}

// readDone serves what a read of n bytes brought (gotRead), or handles
// its error or end of input.
func (l *beanstalkLoop) readDone(b *bloopConn, n int, err error) {
	switch {
	case err == syscall.EAGAIN:
		return
	case err != nil:
		b.dead = true
		l.close(b)
		return
	case n == 0:
		b.eof = true
		if b.waiting {
			b.sess.Cancel() // a reserve ends; a journaled change stays pending
			l.collect(b)
		}
	}
	l.serve(b)
}

// serve runs b's buffered commands in order until it has served them all,
// a command parks it, or its output backs up; then it queues the replies
// for the end of the batch. It does all a connection goroutine does per
// command (beanstalkConn.serve): codec errors, auth, the reserved cap,
// tracing, metrics, quit.
func (l *beanstalkLoop) serve(b *bloopConn) {
	srv, c := l.srv, b.c
	bt := srv.trace
	high := l.outHigh()
	for !b.closed && !b.quit && !b.parked() && b.pending() < high {
		n, cmd, err := b.dec.Decode(b.in[b.ir:])
		b.ir += n
		if cmd == nil && err == nil {
			if n == 0 {
				break // the rest has not arrived
			}
			continue // dropped part of a line or body too big
		}
		var r wire.Reply
		if err != nil { // a *wire.ClientError: nothing else comes from Decode
			ce := err.(*wire.ClientError)
			b.sess.RejectPut(ce.Kind)
			r = wire.Reply{Kind: ce.Kind}
			var verb wire.Verb // 0 ("unknown") for a line the codec refused
			if ce.Kind == wire.JobTooBig || ce.Kind == wire.ExpectedCRLF {
				verb = wire.Put
				if bt != nil {
					bt.rejectedPut(b.sess, ce.Kind)
				}
			}
			l.reply(b, verb, nil, &r)
			continue
		}
		verb := cmd.Verb
		c.watch.frames.Add(1)
		if (c.auth != nil || srv.auth.Load() != nil || auth.IsReservedTube(cmd.Tube)) && c.authorize(srv.auth.Load(), b.sess, cmd, &r) {
			if d := b.hold; d > 0 { // a denied reserve: answer later
				b.held, b.verb, b.heldR, b.hold = true, verb, r, 0
				b.holdDone.Store(false)
				b.timer = time.AfterFunc(d, func() {
					b.holdDone.Store(true)
					l.signal(b)
				})
				break
			}
			l.reply(b, verb, nil, &r)
			continue
		}
		if c.overReserved(b.sess, verb) {
			r = wire.Reply{Kind: wire.DeadlineSoon}
			l.reply(b, verb, nil, &r)
			continue
		}
		if bt != nil {
			bt.before(&b.ct, b.sess, cmd)
		}
		l.execAsync = true
		if !b.sess.ExecAsync(cmd, &r) {
			b.waiting, b.verb, b.pcmd = true, verb, *cmd
			b.pcmd.Tube, b.pcmd.Body = nil, nil // they alias the input buffer
			if b.eof {
				b.sess.Cancel() // the client has gone: a reserve gets TIMED_OUT at once
				if l.collect(b) {
					continue
				}
			}
			break
		}
		l.reply(b, verb, cmd, &r)
	}
	if b.closed {
		return
	}
	if b.ir == len(b.in) {
		b.in, b.ir = b.in[:0], 0
		if cap(b.in) > bloopKeep {
			b.in = nil
		}
	}
	// A request begun and not finished is under the read timeout; a parked
	// one is the engine's to time.
	c.watch.setFlag(watchPartial, !b.parked() && (b.ir < len(b.in) || b.dec.Partial()))
	if b.pending() == 0 && (b.quit || b.eof && !b.parked()) {
		// quit, or the client's commands are all answered; not before
		// the replies are written, which the write timeout bounds.
		l.close(b)
		return
	}
	if b.pending() > 0 && !b.wantOut {
		l.markDirty(b)
	}
	l.interest(b)
}

// collect finishes the command b is parked on if the engine has its
// reply.
func (l *beanstalkLoop) collect(b *bloopConn) bool {
	var r wire.Reply
	if !b.sess.Result(&r) {
		return false
	}
	b.waiting = false
	l.reply(b, b.verb, &b.pcmd, &r)
	return true
}

// reply finishes one command: its trace (cmd nil: no engine command ran),
// its count, and its reply queued; r.Kind 0 closes the connection once
// what is queued is written.
func (l *beanstalkLoop) reply(b *bloopConn, verb wire.Verb, cmd *wire.Command, r *wire.Reply) {
	jobBody := true // r.Body, if any, is the job's own, never modified
	if cmd != nil && l.srv.trace != nil {
		body := r.Body
		l.srv.trace.after(&b.ct, cmd, r)
		// A traceparent envelope replaces it with a buffer the
		// connection's next reserve reuses: that one is copied.
		jobBody = sameBytes(body, r.Body)
	}
	if m := l.srv.metrics; m != nil {
		m.Commands.Beanstalk(verb, beanstalkResult(r.Kind))
	}
	if r.Kind == 0 {
		b.quit = true
		return
	}
	b.appendReply(r, jobBody)
}
