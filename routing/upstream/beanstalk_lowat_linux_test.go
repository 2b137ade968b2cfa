//go:build linux

package upstream

import (
	"bufio"
	"context"
	"math/rand"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/internal/uring"
)

func TestLowatFor(t *testing.T) {
	for _, tc := range []struct{ k, buffered, want int }{
		{0, 0, 1},
		{1, 0, 1},  // one reply: any byte of it is worth a wake-up
		{1, 5, 1},  //
		{2, 0, 16}, // two replies of at least 8 bytes
		{3, 0, 24},
		{4, 3, 29}, // 3 bytes of the first are in the read buffer
		{16, 0, 128},
		{100, 0, 128}, // capped at lowatReplies
		{100, 7, 121},
		{2, 15, 1}, // the first reply is long and mostly read
	} {
		if got := lowatFor(tc.k, tc.buffered); got != tc.want {
			t.Errorf("lowatFor(%d, %d) = %d, want %d", tc.k, tc.buffered, got, tc.want)
		}
	}
}

// lowatUpstream is a fake beanstalkd the test answers by hand, and an
// event-loop session to it served as the gateway's loop serves one: the
// loop writes commands through WriteInto, which sets the mark, and sweeps
// for timeouts (Expire) at the time on the test's clock, which stands
// still unless the test advances it, so the give-up comes only when a
// test asks for it however slow the machine.
type lowatUpstream struct {
	l      *beanstalkLoopIO
	srv    net.Conn
	rd     *bufio.Reader
	stop   func()       // stops the loop; l's loop-only fields are then the test's
	now    atomic.Int64 // the loop's clock, in Unix nanoseconds
	sweeps atomic.Int64 // sweeps the loop has made
}

func openLowatUpstream(t *testing.T) *lowatUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: ln.Addr().String(), IOTimeout: time.Minute}})
	c, err := b.OpenLoop(context.Background(), func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	p, err := epoll.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(p, 3); err != nil {
		t.Fatal(err)
	}
	u := &lowatUpstream{l: c.(*beanstalkLoopIO), srv: srv, rd: bufio.NewReader(srv)}
	u.now.Store(time.Now().UnixNano())
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		batch := uring.New()
		defer batch.Close()
		var evs [4]syscall.EpollEvent
		for {
			select {
			case <-quit:
				return
			default:
			}
			batch.Reset()
			if c.WriteInto(batch) {
				batch.Run()
				c.Wrote()
			}
			n, _ := p.Wait(evs[:], 2)
			for _, ev := range evs[:n] {
				if !c.Ready(ev.Events) {
					return
				}
			}
			c.Expire(time.Unix(0, u.now.Load()))
			u.sweeps.Add(1)
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(quit)
			<-done
		}
	}
	t.Cleanup(func() {
		c.Close()
		stop()
		c.Detach()
		p.Close()
	})
	u.stop = stop
	return u
}

// sweep waits until the loop has swept twice more, so that one sweep
// came after whatever the test did before.
func (u *lowatUpstream) sweep(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for n := u.sweeps.Load(); u.sweeps.Load() < n+2; {
		if time.Now().After(deadline) {
			t.Fatal("the loop stopped sweeping")
		}
		time.Sleep(time.Millisecond)
	}
}

// advance moves the loop's clock on by d and waits for a sweep at the
// new time.
func (u *lowatUpstream) advance(t *testing.T, d time.Duration) {
	t.Helper()
	u.now.Add(int64(d))
	u.sweep(t)
}

// readCommands reads n command lines (and a put's body) off the fake
// server's side.
func (u *lowatUpstream) readCommands(t *testing.T, n int) {
	t.Helper()
	u.srv.SetReadDeadline(time.Now().Add(wait))
	for i := 0; i < n; i++ {
		line, err := u.rd.ReadString('\n')
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if strings.HasPrefix(line, "put ") {
			if _, err := u.rd.ReadString('\n'); err != nil {
				t.Fatalf("body %d: %v", i, err)
			}
		}
	}
}

// lowatPut is the put the tests pipeline.
var lowatPut = beanstalk.Command{Verb: beanstalk.Put, TTR: 60, Body: []byte("a")}

// send has the session pipeline cmd n times, waits until the fake server
// has read them, and returns where their replies go. The loop may have
// written them before it counted them all for the mark (a lower mark
// costs only wake-ups); its next batch raises it, so tests wait for the
// mark (waitMark).
func (u *lowatUpstream) send(t *testing.T, cmd *beanstalk.Command, n int) *results {
	t.Helper()
	rs := newResults()
	for i := 0; i < n; i++ {
		u.l.Do(cmd, rs.done(t))
	}
	u.readCommands(t, n)
	return rs
}

// wantMark fails the test unless the mark is want.
func (u *lowatUpstream) wantMark(t *testing.T, want int, when string) {
	t.Helper()
	if m := u.mark(t); m != want {
		t.Fatalf("%s: SO_RCVLOWAT %d, want %d", when, m, want)
	}
}

// mark reads the session socket's SO_RCVLOWAT.
func (u *lowatUpstream) mark(t *testing.T) int {
	t.Helper()
	v, err := syscall.GetsockoptInt(u.l.rfd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitMark waits until the mark is want.
func (u *lowatUpstream) waitMark(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for u.mark(t) != want {
		if time.Now().After(deadline) {
			t.Fatalf("SO_RCVLOWAT %d, want %d", u.mark(t), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBeanstalkLoopLowat: pipelined commands raise the mark to 8 bytes a
// reply awaited at once, up to a reserve round the server may hold; a
// mark after a read counts the part of a reply already read; replies
// dribbled out in pieces as short as replies get all arrive; then the
// mark is back to 1.
func TestBeanstalkLoopLowat(t *testing.T) {
	u := openLowatUpstream(t)
	rs := u.send(t, &lowatPut, 3)
	u.waitMark(t, 24) // three puts awaited
	u.srv.Write([]byte("INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n"))
	rs.wait(t, 3)
	u.waitMark(t, 1)

	// Two puts, a reserve round that may wait a second, a put: the mark
	// counts the two.
	rs = newResults()
	u.l.Do(&lowatPut, rs.done(t))
	u.l.Do(&lowatPut, rs.done(t))
	u.l.Do(&beanstalk.Command{Verb: beanstalk.ReserveWithTimeout, Timeout: 1}, rs.done(t))
	u.l.Do(&lowatPut, rs.done(t))
	u.readCommands(t, 4)
	u.waitMark(t, 16) // two puts before a reserve
	u.srv.Write([]byte("INSERTED 4\r\nINSERTED 5\r\nTIMED_OUT\r\nINSERTED 6\r\n"))
	rs.wait(t, 4)
	u.waitMark(t, 1)

	// Twenty commands answered with the shortest replies there are. The
	// capped mark (16 replies) wakes the loop with 3 bytes of the 17th
	// reply read; the mark for the 4 left must count them (29, not 32),
	// or the last 29 bytes would never wake it.
	kick := beanstalk.Command{Verb: beanstalk.KickJob, ID: 1}
	rs = u.send(t, &kick, 20)
	u.waitMark(t, 128) // twenty commands awaited (the cap)
	short := []byte(strings.Repeat("KICKED\r\n", 20))
	u.srv.Write(short[:16*8+3])
	rs.wait(t, 16)
	u.waitMark(t, 4*8-3)
	u.srv.Write(short[16*8+3:])
	rs.wait(t, 20)
	u.waitMark(t, 1)

	// Forty such replies in pieces of 1 to 5 bytes, read wherever the
	// pieces fall.
	const n = 40
	rs = u.send(t, &kick, n)
	u.waitMark(t, 128) // forty commands awaited (the cap)
	replies := []byte(strings.Repeat("KICKED\r\n", n-1) + "NOT_FOUND\r\n")
	rnd := rand.New(rand.NewSource(1))
	for len(replies) > 0 {
		k := min(len(replies), 1+rnd.Intn(5))
		if _, err := u.srv.Write(replies[:k]); err != nil {
			t.Fatal(err)
		}
		replies = replies[k:]
		time.Sleep(20 * time.Microsecond) // separate segments, so reads find pieces
	}
	got := rs.wait(t, n)
	for i, r := range got {
		want := beanstalk.Kicked
		if i == n-1 {
			want = beanstalk.NotFound
		}
		if r.err != nil || r.reply.Kind != want {
			t.Fatalf("reply %d: %+v, want %v", i, r, want)
		}
	}
	u.waitMark(t, 1)
}

// TestBeanstalkLoopLowatGivesUp: a mark no reply comes under for
// lowatGiveUp is set back to 1 for the rest of the session.
func TestBeanstalkLoopLowatGivesUp(t *testing.T) {
	u := openLowatUpstream(t)
	cmd := beanstalk.Command{Verb: beanstalk.Delete, ID: 1}
	rs := u.send(t, &cmd, 3)
	u.waitMark(t, 24) // three deletes awaited
	u.sweep(t)        // the sweep that starts counting
	u.advance(t, lowatGiveUp-time.Millisecond)
	u.wantMark(t, 24, "no reply for just under lowatGiveUp")
	u.advance(t, time.Millisecond)
	u.wantMark(t, 1, "no reply for lowatGiveUp")
	// The replies still arrive, and the mark stays at 1 for later
	// pipelined commands.
	u.srv.Write([]byte("DELETED\r\nDELETED\r\nDELETED\r\n"))
	for i, r := range rs.wait(t, 3) {
		if r.err != nil || r.reply.Kind != beanstalk.Deleted {
			t.Fatalf("reply %d: %+v", i, r)
		}
	}
	u.send(t, &cmd, 2)
	u.wantMark(t, 1, "two deletes after giving up")
	u.stop()
	if !u.l.low.off {
		t.Fatal("the session did not record giving up")
	}
}

// TestBeanstalkLoopLowatServerCloses: a server that closes the connection
// with fewer bytes sent than the mark asks for still wakes the loop: the
// reply it sent is delivered and the others fail (the test's clock stands
// still, so the give-up sweep cannot be what wakes it).
func TestBeanstalkLoopLowatServerCloses(t *testing.T) {
	u := openLowatUpstream(t)
	rs := u.send(t, &lowatPut, 3)
	u.waitMark(t, 24) // three puts awaited
	u.srv.Write([]byte("INSERTED 1\r\n"))
	u.srv.Close()
	got := rs.wait(t, 3)
	if got[0].err != nil || got[0].reply.Kind != beanstalk.Inserted {
		t.Fatalf("reply sent before the close: %+v", got[0])
	}
	for i, r := range got[1:] {
		if r.err == nil {
			t.Fatalf("put %d answered %+v after the server closed", i+1, r.reply)
		}
	}
}
