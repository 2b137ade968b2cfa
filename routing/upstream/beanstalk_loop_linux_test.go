//go:build linux

package upstream

import (
	"context"
	"crypto/tls"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/internal/uring"
	"github.com/jobgate/jobgate/routing"
)

// openBeanstalkLoop opens an event-loop session on b and serves it from a
// loop goroutine of its own, as the gateway's loop does, until the test
// ends.
func openBeanstalkLoop(t *testing.T, b *Beanstalk, lost chan error) routing.BeanstalkConn {
	t.Helper()
	c, err := b.OpenLoop(context.Background(), func(err error) { lost <- err })
	if err != nil {
		t.Fatal(err)
	}
	p, err := epoll.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(p, 3); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := uring.New() // every other readiness is read through it
		defer b.Close()
		var evs [4]syscall.EpollEvent
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			n, _ := p.Wait(evs[:], 10)
			for _, ev := range evs[:n] {
				if ev.Events&epoll.In != 0 && i%2 == 0 {
					b.Reset()
					c.ReadInto(b)
					b.Run()
				}
				if !c.Ready(ev.Events) {
					return
				}
			}
			c.Expire(time.Now())
		}
	}()
	t.Cleanup(func() {
		c.Close()
		close(stop)
		<-done
		c.Detach()
		p.Close()
	})
	return c
}

// TestBeanstalkLoopSessions runs the session tests again with every
// session served by an event loop (OpenLoop) instead of a reader
// goroutine.
func TestBeanstalkLoopSessions(t *testing.T) {
	onLoop = true
	defer func() { onLoop = false }()
	for name, f := range map[string]func(*testing.T){
		"Pipelined":           TestBeanstalkPipelined,
		"ReserveCancel":       TestBeanstalkReserveCancel,
		"ReserveRounds":       TestBeanstalkReserveRounds,
		"ServerKilled":        TestBeanstalkServerKilled,
		"CloseAnswersPending": TestBeanstalkCloseAnswersPending,
		"IOTimeout":           TestBeanstalkIOTimeout,
		"ReplyTooBig":         TestBeanstalkReplyTooBig,
	} {
		t.Run(name, f)
	}
}

// TestBeanstalkLoopTLSRefused: a TLS upstream cannot be served on a loop.
func TestBeanstalkLoopTLSRefused(t *testing.T) {
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: testutil.StartBeanstalkd(t)}})
	if !b.CanLoop() {
		t.Fatal("a plain TCP upstream cannot loop")
	}
	b = newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: "127.0.0.1:1", TLS: &tls.Config{}}})
	if b.CanLoop() {
		t.Fatal("a TLS upstream says it can loop")
	}
	if _, err := b.OpenLoop(context.Background(), nil); err != routing.ErrNoLoop {
		t.Fatalf("OpenLoop over TLS: %v, want ErrNoLoop", err)
	}
}
