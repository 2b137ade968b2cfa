//go:build linux

package upstream

import (
	"syscall"
	"time"
)

// Waking the loop once per run of pipelined replies, not once per reply.
//
// beanstalkd writes each reply as it makes it, so a client that pipelines
// a batch of puts gets its replies one TCP segment at a time. Each
// segment woke the loop, which read it and passed it on alone: the
// gateway, the client and beanstalkd (whose write does the waking) all
// paid a wake-up per reply. The session knows how many replies it awaits
// and that none is shorter than replyMinLen bytes, so it sets the
// socket's SO_RCVLOWAT to that many bytes: the kernel reports the socket
// readable only once they are there (or the stream ends, or the receive
// buffer runs short), and the loop reads and passes on the run at once.
// docs/BENCHMARKS.md, "Pipelined replies in one wake-up".
//
// The mark counts only the replies the server gives at once: those
// before the first reserve round, which the server may rightly hold.
// A mark that is too low costs wake-ups; one that is too high would
// leave replies unread, so it is a lower bound: replyMinLen per reply,
// less what a reply cut short has already brought into the read buffer.

const (
	// replyMinLen is the shortest reply beanstalkd sends: "BURIED\r\n",
	// "KICKED\r\n", "PAUSED\r\n".
	replyMinLen = 8
	// lowatReplies caps the replies a mark waits for. While the loop
	// sleeps under its mark, the kernel acknowledges the small segments
	// only every rcv_mss (536 here) bytes, and a server whose congestion
	// window holds fewer segments stops sending until the delayed
	// acknowledgement (40 ms). 16 replies, 128 bytes, is about ten
	// INSERTED segments: measured without delayed acknowledgements, where
	// 32 had hundreds a second and an uncapped mark tens of milliseconds
	// at the p99.
	lowatReplies = 16
	// lowatGiveUp: a session whose mark saw no reply for this long sets
	// it back to one byte for good (checked by the loop's timeout sweep,
	// so up to a sweep period later, and only for a backend with an I/O
	// timeout, as by default). A server that answers within it never
	// trips it, and one slower than that loses only the batching. It
	// keeps a server that replies unlike beanstalkd (Nagle's algorithm
	// on, replies shorter than replyMinLen) from waiting on delayed
	// acknowledgements or the I/O timeout.
	lowatGiveUp = 200 * time.Millisecond
)

// lowatState is a loop session's receive low-water mark. The loop
// goroutine owns it.
type lowatState struct {
	mark    int       // SO_RCVLOWAT in force; 0 is the kernel's default, 1
	off     bool      // given up (lowatGiveUp) or refused by the kernel
	replies uint64    // replies delivered so far
	seen    uint64    // replies at the sweep that last saw one come
	since   time.Time // that sweep's time; zero while the mark is 1
}

// lowatFor is the mark for k replies awaited at once, of which buffered
// bytes are already read: at least 1.
func lowatFor(k, buffered int) int {
	if k < 2 {
		return 1
	}
	return max(1, min(k, lowatReplies)*replyMinLen-buffered)
}

// setLowat sets the socket's mark for the replies now awaited; the loop
// calls it once a read's replies are delivered and before a batch writes
// commands.
func (l *beanstalkLoopIO) setLowat() {
	if l.low.off || l.reported { // reported: the socket is released
		return
	}
	want := 1
	if l.skip == 0 {
		s := l.s
		k := 0
		s.mu.Lock()
		for _, o := range s.queue {
			if o.wait > 0 || k == lowatReplies {
				break
			}
			k++
		}
		s.mu.Unlock()
		want = lowatFor(k, len(l.in)-l.ir)
	}
	if want == max(l.low.mark, 1) {
		return
	}
	if !l.applyLowat(want) {
		l.giveUpLowat()
	}
}

// applyLowat sets the socket's SO_RCVLOWAT to v; false if the kernel
// refused.
func (l *beanstalkLoopIO) applyLowat(v int) bool {
	if syscall.SetsockoptInt(l.rfd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, v) != nil {
		return false
	}
	l.low.mark = v
	return true
}

// giveUpLowat sets the mark back to one byte for the rest of the session.
func (l *beanstalkLoopIO) giveUpLowat() {
	l.low.off = true
	if !l.reported {
		l.applyLowat(1)
	}
}

// sweepLowat gives the mark up when no reply came under it for
// lowatGiveUp; the loop's timeout sweep calls it (Expire).
func (l *beanstalkLoopIO) sweepLowat(now time.Time) {
	low := &l.low
	switch {
	case low.off || low.mark <= 1:
		low.since = time.Time{}
	case low.since.IsZero() || low.replies != low.seen:
		low.seen, low.since = low.replies, now
	case now.Sub(low.since) >= lowatGiveUp:
		l.giveUpLowat()
	}
}
