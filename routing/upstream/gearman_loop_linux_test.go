//go:build linux

package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/internal/uring"
	"github.com/jobgate/jobgate/routing"
)

// loopSession is an event-loop session with a loop of its own: a
// goroutine that waits on an epoll instance and calls Ready and Expire as
// the gateway's event loop does, until Ready says the session is over.
type loopSession struct {
	routing.GearmanLoopConn
	over chan struct{} // closed when Ready returned false
}

// openLoop opens an event-loop session on g and serves it.
func openLoop(t *testing.T, g *Gearman, maxPending int) (*loopSession, *packets) {
	t.Helper()
	pk := newPackets()
	c, err := g.OpenLoop(context.Background(), routing.GearmanEvents{Packet: pk.packet, Closed: pk.lost}, func() int { return maxPending })
	if err != nil {
		t.Fatal(err)
	}
	return serveLoop(t, c), pk
}

// serveLoop serves c from a loop goroutine of its own until the test ends.
// Every other readiness is read through a batch (ReadInto), as the
// gateway's loop reads, and the others by Ready itself.
func serveLoop(t *testing.T, c routing.GearmanLoopConn) *loopSession {
	t.Helper()
	p, err := epoll.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(p, 7); err != nil {
		t.Fatal(err)
	}
	ls := &loopSession{GearmanLoopConn: c, over: make(chan struct{})}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := uring.New()
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
				if ev.Fd != 7 {
					t.Errorf("event for id %d", ev.Fd)
				}
				if ev.Events&epoll.In != 0 && i%2 == 0 {
					b.Reset()
					c.ReadInto(b)
					b.Run()
				}
				if !c.Ready(ev.Events) {
					close(ls.over)
					return
				}
			}
			c.Expire(time.Now())
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		c.Close()
		c.Detach()
		p.Close()
	})
	return ls
}

// ended waits until the loop saw the session end.
func (ls *loopSession) ended(t *testing.T) {
	t.Helper()
	select {
	case <-ls.over:
	case <-time.After(wait):
		t.Fatal("the loop did not see the session end")
	}
}

func TestGearmanLoopSubmitGrabComplete(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 5*time.Second)
	client, cp := openLoop(t, g, 0)
	worker, wp := openLoop(t, g, 0)
	send(t, client, gearman.EchoReq, "hello")
	send(t, client, gearman.SubmitJob, "f", "", "x")
	flush(t, client)
	if p := cp.expect(t, gearman.EchoRes); string(p.Data()) != "hello" {
		t.Fatalf("echo: %v", &p)
	}
	h := string(cp.expect(t, gearman.JobCreated).Args[0])
	send(t, worker, gearman.CanDo, "f")
	send(t, worker, gearman.GrabJob)
	flush(t, worker)
	if p := wp.expect(t, gearman.JobAssign); string(p.Args[0]) != h || string(p.Data()) != "x" {
		t.Fatalf("assign: %v", &p)
	}
	send(t, worker, gearman.WorkComplete, h, "done")
	flush(t, worker)
	if p := cp.expect(t, gearman.WorkComplete); string(p.Data()) != "done" {
		t.Fatalf("complete: %v", &p)
	}
}

// TestGearmanLoopServerKilled: the server dies; both sessions report a
// transport error once and the loop releases their sockets.
func TestGearmanLoopServerKilled(t *testing.T) {
	srv := startProcess(t, "gearmand", testutil.FreePort(t), gearmandArgs)
	g := newGearman(t, srv.addr, 5*time.Second)
	client, cp := openLoop(t, g, 0)
	worker, wp := openLoop(t, g, 0)
	send(t, client, gearman.SubmitJob, "f", "", "x")
	flush(t, client)
	cp.expect(t, gearman.JobCreated)
	send(t, worker, gearman.PreSleep)
	flush(t, worker)
	srv.kill()
	for _, pk := range []*packets{cp, wp} {
		if err := pk.end(t); !routing.IsTransport(err) {
			t.Fatalf("ended with %v, want a transport error", err)
		}
	}
	client.ended(t)
	worker.ended(t)
	if err := client.Send(&gearman.Packet{Magic: gearman.Req, Type: gearman.EchoReq, Args: [][]byte{nil}}); !routing.IsTransport(err) {
		t.Fatalf("send after loss: %v", err)
	}
}

func TestGearmanLoopIOTimeout(t *testing.T) {
	g := newGearman(t, silentServer(t), 100*time.Millisecond)
	c, pk := openLoop(t, g, 0)
	send(t, c, gearman.CanDo, "f") // expects no answer: no deadline
	send(t, c, gearman.EchoReq, "x")
	start := time.Now()
	flush(t, c)
	err := pk.end(t)
	var te *routing.TransportError
	if !errors.Is(err, routing.ErrTimeout) || !errors.As(err, &te) || te.Op != "read" {
		t.Fatalf("ended with %v, want a read ErrTimeout", err)
	}
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("timed out after %v, before the I/O timeout", d)
	}
	c.ended(t)
}

// stuckServer accepts connections and never reads from them, so that a
// client's writes fill the socket buffers and then would block.
func stuckServer(t *testing.T) string { return mute(t, false) }

// TestGearmanLoopWriteStall: a server that stops reading makes writes
// wait for room; Flush never blocks, and the session fails with a write
// timeout once output has made no progress for the I/O timeout.
func TestGearmanLoopWriteStall(t *testing.T) {
	g := newGearman(t, stuckServer(t), 200*time.Millisecond)
	c, pk := openLoop(t, g, 0)
	chunk := []byte(strings.Repeat("d", 1<<20))
	start := time.Now()
	for i := 0; i < 32; i++ { // more than loopback socket buffers take
		// WORK_DATA expects no reply: no read deadline.
		err := c.Send(&gearman.Packet{Magic: gearman.Req, Type: gearman.WorkData, Args: [][]byte{[]byte("H:x:1"), chunk}})
		if err == nil {
			err = c.Flush()
		}
		if err != nil {
			break // the stall was noticed already
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Flush blocked: %v for 32 MiB", d)
	}
	err := pk.end(t)
	var te *routing.TransportError
	if !errors.Is(err, routing.ErrTimeout) || !errors.As(err, &te) || te.Op != "write" {
		t.Fatalf("ended with %v, want a write ErrTimeout", err)
	}
	c.ended(t)
}

// TestGearmanLoopMaxPending: output the server does not take is bounded.
func TestGearmanLoopMaxPending(t *testing.T) {
	g := newGearman(t, stuckServer(t), 0)
	c, pk := openLoop(t, g, 4<<20)
	chunk := []byte(strings.Repeat("d", 1<<20))
	var err error
	for i := 0; i < 64 && err == nil; i++ {
		err = c.Send(&gearman.Packet{Magic: gearman.Req, Type: gearman.WorkData, Args: [][]byte{[]byte("H:x:1"), chunk}})
		if err == nil {
			err = c.Flush()
		}
	}
	if !routing.IsTransport(err) {
		t.Fatalf("64 MiB queued for a server that reads nothing: %v", err)
	}
	if end := pk.end(t); !errors.Is(end, err) && end.Error() != err.Error() {
		t.Fatalf("Closed with %v, Send failed with %v", end, err)
	}
	c.ended(t)
}

// TestGearmanLoopCloseIsQuiet: Close from another goroutine ends the
// session without Closed; the loop still sees it end and lets it go.
func TestGearmanLoopCloseIsQuiet(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), time.Second)
	c, pk := openLoop(t, g, 0)
	send(t, c, gearman.EchoReq, "x")
	flush(t, c)
	pk.expect(t, gearman.EchoRes)
	c.Close()
	if err := c.Send(&gearman.Packet{Magic: gearman.Req, Type: gearman.PreSleep}); !errors.Is(err, routing.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	c.ended(t)
	select {
	case err := <-pk.closed:
		t.Fatalf("Closed called after Close: %v", err)
	default:
	}
}

func TestGearmanLoopNotOverTLS(t *testing.T) {
	g, err := NewGearman(GearmanConfig{Config: Config{Addr: "127.0.0.1:1", TLS: &tls.Config{}}})
	if err != nil {
		t.Fatal(err)
	}
	if g.CanLoop() {
		t.Fatal("a TLS upstream claims event-loop sessions")
	}
	if _, err := g.OpenLoop(context.Background(), eventsDiscard(), nil); !errors.Is(err, routing.ErrNoLoop) {
		t.Fatalf("OpenLoop over TLS: %v", err)
	}
}

// TestGearmanLoopIdleNoTimeout: once the replies came, an idle session
// outlives several I/O timeouts and sweeps. The sleep is the subject of
// the test (time passing with nothing outstanding).
func TestGearmanLoopIdleNoTimeout(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 50*time.Millisecond)
	c, pk := openLoop(t, g, 0)
	send(t, c, gearman.EchoReq, "1")
	flush(t, c)
	pk.expect(t, gearman.EchoRes)
	time.Sleep(200 * time.Millisecond)
	send(t, c, gearman.EchoReq, "2")
	flush(t, c)
	pk.expect(t, gearman.EchoRes)
}

// TestGearmanLoopBreaker: through Backend.OpenGearmanLoop, a loop session
// that breaks counts as one failure for the breaker, and so does a dial
// that fails; two open it.
func TestGearmanLoopBreaker(t *testing.T) {
	srv := startProcess(t, "gearmand", testutil.FreePort(t), gearmandArgs)
	br, err := routing.NewBreaker(routing.BreakerConfig{Name: "g", Failures: 2, OpenTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b := &routing.Backend{ID: 1, Name: "g", Gearman: newGearman(t, srv.addr, 5*time.Second), Breaker: br}
	if !b.CanLoop() {
		t.Fatal("a plain-TCP gearmand cannot loop")
	}
	pk := newPackets()
	open := func() (routing.GearmanLoopConn, error) {
		return b.OpenGearmanLoop(context.Background(), routing.GearmanEvents{Packet: pk.packet, Closed: pk.lost}, nil)
	}
	c, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ls := serveLoop(t, c)
	send(t, c, gearman.EchoReq, "x")
	flush(t, c)
	pk.expect(t, gearman.EchoRes)
	srv.kill()
	if err := pk.end(t); !routing.IsTransport(err) {
		t.Fatalf("ended with %v", err)
	}
	ls.ended(t)
	if s := br.State(); s != routing.BreakerClosed {
		t.Fatalf("breaker %v after one broken session (counted twice?)", s)
	}
	if _, err := open(); !routing.IsTransport(err) {
		t.Fatalf("dial to a dead server: %v", err)
	}
	if s := br.State(); s != routing.BreakerOpen {
		t.Fatalf("breaker %v after a broken session and a failed dial", s)
	}
	if _, err := open(); !errors.Is(err, routing.ErrUnavailable) {
		t.Fatalf("open breaker let a dial through: %v", err)
	}
}

// TestGearmanLoopBatchedWrite: a write queued in the loop's batch
// (WriteInto) goes out when the batch runs; what is sent and flushed
// meanwhile, from any goroutine, follows it in order (Wrote), and a
// session with nothing waiting queues nothing.
func TestGearmanLoopBatchedWrite(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 5*time.Second)
	c, cp := openLoop(t, g, 0)
	b := uring.New()
	defer b.Close()
	if c.WriteInto(b) {
		t.Fatal("WriteInto queued a write with nothing waiting")
	}
	for i := 0; i < 3; i++ {
		send(t, c, gearman.EchoReq, fmt.Sprint("a", i))
	}
	if !c.WriteInto(b) || c.WriteInto(b) {
		t.Fatal("WriteInto: want one write queued, once")
	}
	send(t, c, gearman.EchoReq, "b0")
	flush(t, c) // behind the batch's write: left to Wrote
	send(t, c, gearman.EchoReq, "b1")
	b.Run()
	c.Wrote()
	for _, want := range []string{"a0", "a1", "a2", "b0", "b1"} {
		if p := cp.expect(t, gearman.EchoRes); string(p.Data()) != want {
			t.Fatalf("echo %s: got %v", want, &p)
		}
	}
}
