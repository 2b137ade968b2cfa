package upstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing"
)

// TestGearmanBusyNoTimeout: the read deadline is set lazily, so on a busy
// session it fires while a request is outstanding but not late (answered
// requests keep moving the real deadline). That must not end the session:
// echoes answered at once for several I/O timeouts all come back.
//
// gearmand runs in another process, so on a loaded machine an echo can
// really stay unanswered for an I/O timeout, and then the session must end.
// What is checked is that it never ends sooner: a timeout that comes less
// than an I/O timeout after the echo was sent fails the test; a later one
// is the machine's doing, and the run starts again on a new session.
func TestGearmanBusyNoTimeout(t *testing.T) {
	const io = 30 * time.Millisecond
	g := newGearman(t, testutil.StartGearmand(t), io)
	for until := time.Now().Add(wait); !busyEchoes(t, g, io); {
		if time.Now().After(until) {
			t.Fatalf("no session answered %v of echoes without one of them waiting %v", busyFor, io)
		}
	}
}

// busyFor is how long busyEchoes keeps one session busy: several I/O
// timeouts, so that stale read deadlines fire with an echo outstanding.
const busyFor = 200 * time.Millisecond

// busyEchoes sends echoes one after the other on a new session for busyFor.
// It returns true when all came back, false when the session timed out
// with an echo really late; an early timeout or any other end fails t.
func busyEchoes(t *testing.T, g *Gearman, io time.Duration) bool {
	type end struct {
		err error
		at  time.Time
	}
	packets := make(chan gearman.Packet, 1)
	ended := make(chan end, 1)
	c, err := g.Open(context.Background(), routing.GearmanEvents{
		Packet: func(p *gearman.Packet) { packets <- p.Clone() },
		Closed: func(err error) { ended <- end{err, time.Now()} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo := gearman.Packet{Magic: gearman.Req, Type: gearman.EchoReq, Args: [][]byte{[]byte("x")}}
	for stop := time.Now().Add(busyFor); time.Now().Before(stop); {
		// Taken before Send arms the deadline, so a timeout the session
		// decides rightly comes at least io after it.
		sent := time.Now()
		// An error means the session ended, and ended says why.
		if c.Send(&echo) == nil {
			_ = c.Flush()
		}
		select {
		case p := <-packets:
			if p.Type != gearman.EchoRes {
				t.Fatalf("got %v, want ECHO_RES", &p)
			}
			continue
		case e := <-ended:
			if !errors.Is(e.err, routing.ErrTimeout) {
				t.Fatalf("session ended: %v", e.err)
			}
			waited := e.at.Sub(sent)
			if waited < io {
				t.Fatalf("session timed out %v after the echo was sent, before the I/O timeout %v: %v", waited, io, e.err)
			}
			t.Logf("echo unanswered for %v (machine busy): again on a new session", waited)
			return false
		case <-time.After(wait):
			t.Fatal("no packet")
		}
	}
	return true
}
