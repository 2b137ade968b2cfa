package proxy

import (
	"sync"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// gwLocal is a gateway session's session on the local engine. It is the
// engine's gearman.Output for that session and turns what the engine sends
// into calls of deliver, with the guarantees routing.GearmanEvents gives
// for upstream sessions: never concurrently, in order, and never from
// inside Send.
//
// Why the last one: the engine answers a request from inside
// Session.Handle with its lock held. A gateway session reacting to that
// answer may need to call into the engine again (a NO_JOB moves a GRAB_JOB
// on to the next backend, which may be the local one), which would
// deadlock. So what the engine sends during Send is queued and delivered
// after Handle returns, by Send itself; what it sends at other times
// (WORK_* and NOOP caused by other connections) is delivered at once,
// under the engine's lock, and queued behind anything still undelivered.
//
// Send and Text must not be called concurrently (the gateway session holds
// its gwBackend.sendMu around them). Lock order: engine lock, then gwLocal.mu.
type gwLocal struct {
	sess    *gearman.Session
	deliver func(p *codec.Packet)

	mu     sync.Mutex
	inSend bool           // guarded by mu: Send is running or draining queue
	queue  []codec.Packet // guarded by mu: packets waiting for delivery (clones)
	text   []byte         // guarded by mu: admin text written by the running Text
}

// WritePacket implements gearman.Output.
func (l *gwLocal) WritePacket(p *codec.Packet) {
	l.mu.Lock()
	if l.inSend {
		l.queue = append(l.queue, p.Clone())
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	// Not in Send: the engine holds its lock, so no Send can start and
	// deliver concurrently with this call.
	l.deliver(p)
}

// WriteText implements gearman.Output: the engine writes text only to
// answer the session's own admin line (Text).
func (l *gwLocal) WriteText(b []byte) {
	l.mu.Lock()
	l.text = append(l.text, b...)
	l.mu.Unlock()
}

// Send runs one request and then delivers what the engine answered. A
// non-nil error is the engine's: the client connection must close.
func (l *gwLocal) Send(p *codec.Packet) error {
	l.begin()
	err := l.sess.Handle(p)
	l.drain()
	return err
}

// Text runs one admin line and returns the engine's answer.
func (l *gwLocal) Text(line []byte) ([]byte, error) {
	l.begin()
	err := l.sess.HandleText(line)
	l.mu.Lock()
	out := l.text
	l.text = nil
	l.mu.Unlock()
	l.drain()
	return out, err
}

func (l *gwLocal) begin() {
	l.mu.Lock()
	l.inSend = true
	l.mu.Unlock()
}

// drain delivers the queue until it stays empty, then lets WritePacket
// deliver directly again.
func (l *gwLocal) drain() {
	for {
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		if len(q) == 0 {
			l.inSend = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		for i := range q {
			l.deliver(&q[i])
		}
	}
}
