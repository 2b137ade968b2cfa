package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing"
)

func newGearman(t *testing.T, addr string, io time.Duration) *Gearman {
	t.Helper()
	g, err := NewGearman(GearmanConfig{Config: Config{Addr: addr, IOTimeout: io, DialTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func openGearman(t *testing.T, g *Gearman) (routing.GearmanConn, *packets) {
	t.Helper()
	pk := newPackets()
	c, err := g.Open(context.Background(), routing.GearmanEvents{Packet: pk.packet, Closed: pk.lost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, pk
}

func send(t *testing.T, c routing.GearmanConn, typ gearman.Type, args ...string) {
	t.Helper()
	p := gearman.Packet{Magic: gearman.Req, Type: typ}
	for _, a := range args {
		p.Args = append(p.Args, []byte(a))
	}
	if err := c.Send(&p); err != nil {
		t.Fatalf("send %v: %v", typ, err)
	}
}

func flush(t *testing.T, c interface{ Flush() error }) {
	t.Helper()
	if err := c.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func TestGearmanSubmitGrabComplete(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 5*time.Second)
	client, cp := openGearman(t, g)
	worker, wp := openGearman(t, g)

	// Pipelined: option, echo and submit in one write, answered in order.
	send(t, client, gearman.OptionReq, "exceptions")
	send(t, client, gearman.EchoReq, "ping")
	send(t, client, gearman.SubmitJob, "reverse", "", "hello")
	flush(t, client)
	cp.expect(t, gearman.OptionRes)
	if p := cp.expect(t, gearman.EchoRes); string(p.Data()) != "ping" {
		t.Fatalf("echo %v", &p)
	}
	created := cp.expect(t, gearman.JobCreated)
	handle := string(created.Handle())

	send(t, worker, gearman.CanDo, "reverse")
	send(t, worker, gearman.EchoReq, "sync") // answered after CAN_DO took effect
	flush(t, worker)
	wp.expect(t, gearman.EchoRes)
	lines, err := g.Admin(context.Background(), "status")
	if err != nil {
		t.Fatal(err)
	}
	if !contains(lines, "reverse\t1\t0\t1") {
		t.Fatalf("status %q, want reverse with 1 job, 0 running, 1 worker", lines)
	}
	send(t, worker, gearman.GrabJob)
	flush(t, worker)
	assign := wp.expect(t, gearman.JobAssign)
	if string(assign.Handle()) != handle || string(assign.Function()) != "reverse" || string(assign.Data()) != "hello" {
		t.Fatalf("assign %v", &assign)
	}
	send(t, client, gearman.GetStatus, handle)
	flush(t, client)
	if st := cp.expect(t, gearman.StatusRes); string(st.Field(gearman.FieldRunning)) != "1" {
		t.Fatalf("status %v", &st)
	}
	send(t, worker, gearman.WorkData, handle, "ol")
	send(t, worker, gearman.WorkComplete, handle, "olleh")
	flush(t, worker)
	if p := cp.expect(t, gearman.WorkData); string(p.Data()) != "ol" {
		t.Fatalf("data %v", &p)
	}
	if p := cp.expect(t, gearman.WorkComplete); string(p.Handle()) != handle || string(p.Data()) != "olleh" {
		t.Fatalf("complete %v", &p)
	}
	// An unsolicited ERROR (a WORK_* for an unknown job) does not upset
	// the reply accounting: the next request is still answered.
	send(t, worker, gearman.WorkComplete, "H:nope:1", "x")
	send(t, worker, gearman.EchoReq, "still")
	flush(t, worker)
	wp.expect(t, gearman.Error)
	wp.expect(t, gearman.EchoRes)

	if err := g.Probe(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if lines, err := g.Admin(context.Background(), "version"); err != nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "OK ") {
		t.Fatalf("version: %q %v", lines, err)
	}
	if lines, err := g.Admin(context.Background(), "show nonsense"); err != nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "ERR ") {
		t.Fatalf("show nonsense: %q %v", lines, err)
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestGearmanServerKilled: the server dies while a client waits for its
// job and a worker sleeps: both sessions end promptly with a transport
// error, and sending afterwards fails.
func TestGearmanServerKilled(t *testing.T) {
	srv := startProcess(t, "gearmand", testutil.FreePort(t), gearmandArgs)
	g := newGearman(t, srv.addr, 5*time.Second)
	client, cp := openGearman(t, g)
	worker, wp := openGearman(t, g)
	send(t, client, gearman.SubmitJob, "f", "", "x")
	flush(t, client)
	cp.expect(t, gearman.JobCreated)
	send(t, worker, gearman.PreSleep)
	flush(t, worker)

	start := time.Now()
	srv.kill()
	for _, pk := range []*packets{cp, wp} {
		err := pk.end(t)
		var te *routing.TransportError
		if !errors.As(err, &te) || !routing.IsTransport(err) {
			t.Fatalf("ended with %v, want a transport error", err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to notice", d)
	}
	err := client.Send(&gearman.Packet{Magic: gearman.Req, Type: gearman.EchoReq, Args: [][]byte{nil}})
	if err == nil {
		err = client.Flush()
	}
	if !routing.IsTransport(err) {
		t.Fatalf("send after loss: %v", err)
	}
}

// silentServer accepts connections and reads everything, answering nothing.
func silentServer(t *testing.T) string { return mute(t, true) }

// mute accepts connections and answers nothing; with drain it reads
// everything sent, else nothing, so that a client's writes fill the socket
// buffers and then would block.
func mute(t *testing.T, drain bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns connSet
	t.Cleanup(func() { l.Close(); conns.closeAll() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.add(c)
			if drain {
				go io.Copy(io.Discard, c)
			}
		}
	}()
	return l.Addr().String()
}

func TestGearmanIOTimeout(t *testing.T) {
	g := newGearman(t, silentServer(t), 100*time.Millisecond)
	c, pk := openGearman(t, g)
	// CAN_DO expects no answer: no deadline.
	send(t, c, gearman.CanDo, "f")
	flush(t, c)
	send(t, c, gearman.EchoReq, "x")
	flush(t, c)
	start := time.Now()
	err := pk.end(t)
	if !errors.Is(err, routing.ErrTimeout) {
		t.Fatalf("ended with %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("timed out after %v, before the I/O timeout", d)
	}
}

// TestGearmanIdleNoTimeout: a deadline armed for a request that was
// answered is gone: an idle session outlives several I/O timeouts. The
// sleep is the subject of the test (time passing with nothing
// outstanding), not a wait for another goroutine.
func TestGearmanIdleNoTimeout(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), 50*time.Millisecond)
	c, pk := openGearman(t, g)
	send(t, c, gearman.EchoReq, "1")
	flush(t, c)
	pk.expect(t, gearman.EchoRes)
	time.Sleep(200 * time.Millisecond)
	send(t, c, gearman.EchoReq, "2")
	flush(t, c)
	pk.expect(t, gearman.EchoRes)
}

func TestGearmanCloseIsQuiet(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), time.Second)
	var closed atomic.Bool
	c, err := g.Open(context.Background(), routing.GearmanEvents{
		Packet: func(*gearman.Packet) {},
		Closed: func(error) { closed.Store(true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := c.Send(&gearman.Packet{Magic: gearman.Req, Type: gearman.PreSleep}); !errors.Is(err, routing.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	if closed.Load() {
		t.Fatal("Closed called after Close")
	}
}

// scriptedServer answers the first read of each connection with reply.
func scriptedServer(t *testing.T, reply string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns connSet
	t.Cleanup(func() { l.Close(); conns.closeAll() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.add(c)
			go func() {
				buf := make([]byte, 4096)
				if _, err := c.Read(buf); err == nil {
					_, _ = c.Write([]byte(reply))
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestGarbageFromServer: bytes that are not the protocol end the session
// with a transport error, and the pending request gets it.
func TestGarbageFromServer(t *testing.T) {
	t.Run("gearman", func(t *testing.T) {
		g := newGearman(t, scriptedServer(t, "HTTP/1.1 400 Bad Request\r\n\r\n"), wait)
		c, pk := openGearman(t, g)
		send(t, c, gearman.EchoReq, "x")
		flush(t, c)
		if err := pk.end(t); !routing.IsTransport(err) {
			t.Fatalf("ended with %v", err)
		}
	})
	t.Run("beanstalk", func(t *testing.T) {
		b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: scriptedServer(t, "HTTP/1.1 400 Bad Request\r\n\r\n"), IOTimeout: wait}})
		c, lost := openBeanstalk(t, b)
		rs := newResults()
		c.Do(&beanstalk.Command{Verb: beanstalk.Stats}, rs.done(t))
		flush(t, c)
		if r := rs.wait(t, 1)[0]; !routing.IsTransport(r.err) {
			t.Fatalf("got %+v", r)
		}
		select {
		case err := <-lost:
			if !routing.IsTransport(err) {
				t.Fatalf("closed with %v", err)
			}
		case <-time.After(wait):
			t.Fatal("closed callback not called")
		}
	})
	t.Run("beanstalk unsolicited", func(t *testing.T) {
		// A reply with nothing pending: the stream cannot be trusted.
		b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: scriptedServer(t, "USING a\r\nUSING b\r\n"), IOTimeout: wait}})
		c, lost := openBeanstalk(t, b)
		rs := newResults()
		c.Do(&beanstalk.Command{Verb: beanstalk.ListTubeUsed}, rs.done(t))
		flush(t, c)
		if r := rs.wait(t, 1)[0]; r.err != nil || string(r.reply.Tube) != "a" {
			t.Fatalf("got %+v", r)
		}
		select {
		case err := <-lost:
			if !routing.IsTransport(err) {
				t.Fatalf("closed with %v", err)
			}
		case <-time.After(wait):
			t.Fatal("closed callback not called")
		}
	})
}

// TestGearmanAdminErrLikeName checks that a listing with a function named
// "ERR ..." is read whole, not as an error answer: an error answer's line
// has no tab, a status line does. Both orders of registration put the
// "ERR" line first in one of them, whatever order gearmand lists in.
func TestGearmanAdminErrLikeName(t *testing.T) {
	for _, fns := range [][]string{{"ERR x", "a"}, {"a", "ERR x"}} {
		g := newGearman(t, testutil.StartGearmand(t), 5*time.Second)
		worker, wp := openGearman(t, g)
		for _, fn := range fns {
			send(t, worker, gearman.CanDo, fn)
		}
		send(t, worker, gearman.EchoReq, "sync") // answered after CAN_DO took effect
		flush(t, worker)
		wp.expect(t, gearman.EchoRes)
		lines, err := g.Admin(context.Background(), "status")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(lines)
		if want := []string{"ERR x\t0\t0\t1", "a\t0\t0\t1"}; !slices.Equal(lines, want) {
			t.Fatalf("registered %q: status %q, want %q", fns, lines, want)
		}
	}
}
