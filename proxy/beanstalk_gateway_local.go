package proxy

import (
	"context"
	"sync"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/routing"
)

// bgwLocalBackend is the local engine as a routing.BeanstalkBackend (the
// backend with id 0 and no opener of its own): each Open is a new engine
// session, so a gateway client holds one, as it holds one per upstream.
type bgwLocalBackend struct{ eng *engine.Engine }

var _ routing.BeanstalkBackend = bgwLocalBackend{}

// Open starts a session on the engine; it cannot fail, and the session
// never ends by itself, so closed is not called.
func (l bgwLocalBackend) Open(context.Context, func(error)) (routing.BeanstalkConn, error) {
	return newBgwLocal(l.eng), nil
}

// bgwLocal is a gateway session's session on the local engine, as a
// routing.BeanstalkConn: commands run at once on the caller's goroutine
// (done is called before Do returns), except a reserve that has to wait,
// whose done runs on a goroutine started when the engine notifies.
//
// Lock order: bgwLocal.mu, then the engine's lock. The engine calls notify
// with its lock held, so notify only starts the goroutine that collects
// the answer.
type bgwLocal struct {
	sess *engine.Session
	r    wire.Reply // the reply of the command running; owned by Do's caller

	mu      sync.Mutex
	pending func(*wire.Reply, error) // guarded by mu: the waiting reserve's done
	closed  bool                     // guarded by mu
}

var _ routing.BeanstalkConn = (*bgwLocal)(nil)

func newBgwLocal(eng *engine.Engine) *bgwLocal {
	l := &bgwLocal{}
	l.sess = eng.NewSession(l.notify)
	return l
}

// notify runs under the engine's lock: hand the answer over.
func (l *bgwLocal) notify() { go l.collect() }

// collect delivers a waiting reserve's answer, unless Cancel or Close got
// there first.
func (l *bgwLocal) collect() {
	l.mu.Lock()
	done := l.pending
	var r wire.Reply
	if done == nil || !l.sess.Result(&r) {
		l.mu.Unlock()
		return
	}
	l.pending = nil
	l.mu.Unlock()
	done(&r, nil)
}

// Do runs cmd on the engine (see routing.BeanstalkConn).
func (l *bgwLocal) Do(cmd *wire.Command, done func(*wire.Reply, error)) {
	switch cmd.Verb {
	case wire.Quit:
		l.Close()
		done(nil, routing.ErrClosed)
		return
	case wire.Reserve, wire.ReserveWithTimeout:
		// pending is set before Exec so that a notify right after Exec
		// finds it.
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			done(nil, routing.ErrClosed)
			return
		}
		l.pending = done
		if !l.sess.Exec(cmd, &l.r) {
			l.mu.Unlock()
			return
		}
		l.pending = nil
		l.mu.Unlock()
		done(&l.r, nil)
		return
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		done(nil, routing.ErrClosed)
		return
	}
	l.sess.Exec(cmd, &l.r)
	done(&l.r, nil)
}

// Flush has nothing to write: the engine answered already.
func (l *bgwLocal) Flush() error { return nil }

// Cancel ends a waiting reserve with TIMED_OUT; a job the engine had
// handed it and nobody collected goes back to ready in its old place.
func (l *bgwLocal) Cancel() {
	l.mu.Lock()
	done := l.pending
	if done == nil {
		l.mu.Unlock()
		return
	}
	l.pending = nil
	l.sess.Cancel()
	r := wire.Reply{Kind: wire.TimedOut}
	var got wire.Reply
	if l.sess.Result(&got) {
		r = got
	}
	l.mu.Unlock()
	done(&r, nil)
}

// Close ends the session: the engine returns its reservations to ready.
func (l *bgwLocal) Close() {
	l.mu.Lock()
	done := l.pending
	l.pending = nil
	l.closed = true
	l.mu.Unlock()
	l.sess.Close()
	if done != nil {
		done(nil, routing.ErrClosed)
	}
}
