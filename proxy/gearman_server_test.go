package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

func TestGearmanAdminShutdownReachesCallback(t *testing.T) {
	got := make(chan bool, 2)
	srv, err := NewGearmanServer(GearmanConfig{OnShutdown: func(graceful bool) { got <- graceful }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	nc.Write([]byte("shutdown\n"))
	if reply, _ := readText(br); reply != "OK\r\n" {
		t.Fatalf("shutdown: %q", reply)
	}
	if g := <-got; g {
		t.Fatal("plain shutdown reported graceful")
	}
	nc.Write([]byte("shutdown graceful\n"))
	if reply, _ := readText(br); reply != "OK\r\n" {
		t.Fatalf("shutdown graceful: %q", reply)
	}
	if g := <-got; !g {
		t.Fatal("graceful shutdown reported plain")
	}
	// Graceful mode closed the listener; the connection still works.
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	nc.Write(codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("x")))
	if p, err := readPacket(br); err != nil || p.Type != codec.EchoRes {
		t.Fatalf("echo after graceful shutdown: %v %v", p, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("connection open after Shutdown")
	}
}

// TestGearmanAsyncDelivery checks that packets caused by another
// connection (NOOP, WORK_COMPLETE) reach an idle connection through its
// writer, including many at once.
func TestGearmanAsyncDelivery(t *testing.T) {
	forEachServeMode(t, gearmanAsyncDelivery)
}

func gearmanAsyncDelivery(t *testing.T, addr string) {
	dial := func() (net.Conn, *bufio.Reader) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		return nc, bufio.NewReader(nc)
	}
	w, wr := dial()
	c, cr := dial()
	w.Write(append(codec.AppendPacket(nil, codec.Req, codec.CanDo, []byte("f")),
		codec.AppendPacket(nil, codec.Req, codec.PreSleep)...))
	w.Write(codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("sync")))
	if p, err := readPacket(wr); err != nil || p.Type != codec.EchoRes {
		t.Fatalf("sync: %v %v", p, err)
	}
	const n = 1000
	var batch []byte
	for i := 0; i < n; i++ {
		batch = codec.AppendPacket(batch, codec.Req, codec.SubmitJob, []byte("f"), nil, make([]byte, 100))
	}
	c.Write(batch)
	for i := 0; i < n; i++ {
		if p, err := readPacket(cr); err != nil || p.Type != codec.JobCreated {
			t.Fatalf("submit %d: %v %v", i, p, err)
		}
	}
	if p, err := readPacket(wr); err != nil || p.Type != codec.Noop {
		t.Fatalf("worker wakeup: %v %v", p, err)
	}
	for i := 0; i < n; i++ {
		w.Write(codec.AppendPacket(nil, codec.Req, codec.GrabJob))
		p, err := readPacket(wr)
		if err != nil || p.Type != codec.JobAssign {
			t.Fatalf("grab %d: %v %v", i, p, err)
		}
		w.Write(codec.AppendPacket(nil, codec.Req, codec.WorkComplete, p.Args[0], []byte("r")))
	}
	for i := 0; i < n; i++ {
		if p, err := readPacket(cr); err != nil || p.Type != codec.WorkComplete {
			t.Fatalf("complete %d: %v %v", i, p, err)
		}
	}
}

func gearmanConfigForTest() gearman.Config { return gearman.Config{HandlePrefix: "H:test"} }

// forEachServeMode runs test against a server using the event loop and
// one using a goroutine pair per connection.
func forEachServeMode(t *testing.T, test func(t *testing.T, addr string)) {
	for _, goroutines := range []bool{false, true} {
		name := "loop"
		if goroutines {
			name = "goroutines"
		}
		t.Run(name, func(t *testing.T) {
			test(t, startJobgateGearmanServer(t, GearmanConfig{Engine: gearmanConfigForTest(), Goroutines: goroutines}))
		})
	}
}

// TestGearmanConcurrentClientsAndWorkers runs foreground jobs from several
// clients through several sleeping/waking workers at once (run it with
// -race): every job completes exactly once.
func TestGearmanConcurrentClientsAndWorkers(t *testing.T) {
	forEachServeMode(t, gearmanConcurrentClientsAndWorkers)
}

func gearmanConcurrentClientsAndWorkers(t *testing.T, addr string) {
	const clients, workers, jobs = 6, 3, 150
	dial := func() (net.Conn, *bufio.Reader) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
		return nc, bufio.NewReader(nc)
	}
	errc := make(chan error, clients+workers)
	done := make(chan struct{})
	for i := 0; i < workers; i++ {
		nc, br := dial()
		defer nc.Close()
		go func() {
			nc.Write(append(codec.AppendPacket(nil, codec.Req, codec.CanDo, []byte("f")),
				codec.AppendPacket(nil, codec.Req, codec.GrabJob)...))
			for {
				p, err := readPacket(br)
				if err != nil {
					select {
					case <-done:
					default:
						errc <- err
					}
					return
				}
				var out []byte
				switch p.Type {
				case codec.JobAssign:
					out = codec.AppendPacket(out, codec.Req, codec.WorkData, p.Args[0], []byte("d"))
					out = codec.AppendPacket(out, codec.Req, codec.WorkComplete, p.Args[0], p.Args[2])
					out = codec.AppendPacket(out, codec.Req, codec.GrabJob)
				case codec.NoJob:
					out = codec.AppendPacket(out, codec.Req, codec.PreSleep)
				case codec.Noop:
					out = codec.AppendPacket(out, codec.Req, codec.GrabJob)
				}
				nc.Write(out)
			}
		}()
	}
	results := make(chan error, clients)
	for i := 0; i < clients; i++ {
		nc, br := dial()
		defer nc.Close()
		go func() {
			for j := 0; j < jobs; j++ {
				body := []byte(time.Now().String())
				nc.Write(codec.AppendPacket(nil, codec.Req, codec.SubmitJob, []byte("f"), nil, body))
				var h []byte
				for step := 0; step < 3; step++ {
					p, err := readPacket(br)
					if err != nil {
						results <- err
						return
					}
					switch {
					case step == 0 && p.Type == codec.JobCreated:
						h = p.Args[0]
					case step == 1 && p.Type == codec.WorkData && string(p.Args[0]) == string(h):
					case step == 2 && p.Type == codec.WorkComplete && string(p.Args[1]) == string(body):
					default:
						results <- fmt.Errorf("job %d step %d: got %s", j, step, describe(p))
						return
					}
				}
			}
			results <- nil
		}()
	}
	for i := 0; i < clients; i++ {
		select {
		case err := <-results:
			if err != nil {
				t.Fatal(err)
			}
		case err := <-errc:
			t.Fatal(err)
		}
	}
	close(done)
}

// TestGearmanRepliesBeforePartialFrame checks that replies go out when the
// server waits for the rest of a frame, not only when its buffer is empty.
func TestGearmanRepliesBeforePartialFrame(t *testing.T) {
	forEachServeMode(t, testGearmanRepliesBeforePartialFrame)
}

func testGearmanRepliesBeforePartialFrame(t *testing.T, addr string) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	second := codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("second"))
	nc.Write(append(codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("first")), second[:15]...))
	if p, err := readPacket(br); err != nil || string(p.Args[0]) != "first" {
		t.Fatalf("first echo: %v %v", p, err)
	}
	nc.Write(second[15:])
	if p, err := readPacket(br); err != nil || string(p.Args[0]) != "second" {
		t.Fatalf("second echo: %v %v", p, err)
	}
}

// TestGearmanSlowConsumerClosed checks that a client that does not read is
// cut off once MaxOutput bytes wait for it, and the worker is not blocked.
func TestGearmanSlowConsumerClosed(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("goroutines=%v", goroutines), func(t *testing.T) {
			testGearmanSlowConsumerClosed(t, goroutines)
		})
	}
}

func testGearmanSlowConsumerClosed(t *testing.T, goroutines bool) {
	srv, err := NewGearmanServer(GearmanConfig{MaxOutput: 64 << 10, Goroutines: goroutines})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_ = w.SetDeadline(time.Now().Add(20 * time.Second))
	wr := bufio.NewReader(w)
	c.Write(codec.AppendPacket(nil, codec.Req, codec.SubmitJob, []byte("f"), nil, []byte("x")))
	w.Write(append(codec.AppendPacket(nil, codec.Req, codec.CanDo, []byte("f")), codec.AppendPacket(nil, codec.Req, codec.GrabJob)...))
	p, err := readPacket(wr)
	for err == nil && p.Type == codec.NoJob {
		w.Write(codec.AppendPacket(nil, codec.Req, codec.GrabJob))
		p, err = readPacket(wr)
	}
	if err != nil || p.Type != codec.JobAssign {
		t.Fatalf("grab: %v %v", p, err)
	}
	// 64 MiB of WORK_DATA for a client that never reads: far more than
	// socket buffers and MaxOutput hold.
	chunk := codec.AppendPacket(nil, codec.Req, codec.WorkData, p.Args[0], make([]byte, 1<<20))
	for i := 0; i < 64; i++ {
		if _, err := w.Write(chunk); err != nil {
			t.Fatalf("worker write %d: %v", i, err)
		}
	}
	w.Write(codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("alive")))
	for {
		p, err := readPacket(wr)
		if err != nil {
			t.Fatalf("worker blocked or cut off: %v", err)
		}
		if p.Type == codec.EchoRes {
			break
		}
	}
	// The server closed the client: draining it ends in EOF, not a timeout.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("slow client was not closed: %v", err)
	}
}

// TestGearmanLargeOutputToLateReader sends a client far more WORK_DATA than
// socket buffers hold before it reads anything: the server must keep the
// rest, write it as the socket drains (EPOLLOUT in the event loop), in
// order, and still serve other connections meanwhile.
func TestGearmanLargeOutputToLateReader(t *testing.T) {
	forEachServeMode(t, testGearmanLargeOutputToLateReader)
}

func testGearmanLargeOutputToLateReader(t *testing.T, addr string) {
	dial := func() (net.Conn, *bufio.Reader) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		return nc, bufio.NewReader(nc)
	}
	c, cr := dial()
	w, wr := dial()
	c.Write(codec.AppendPacket(nil, codec.Req, codec.SubmitJob, []byte("f"), nil, []byte("x")))
	if p, err := readPacket(cr); err != nil || p.Type != codec.JobCreated {
		t.Fatalf("submit: %v %v", p, err)
	}
	w.Write(append(codec.AppendPacket(nil, codec.Req, codec.CanDo, []byte("f")), codec.AppendPacket(nil, codec.Req, codec.GrabJob)...))
	p, err := readPacket(wr)
	if err != nil || p.Type != codec.JobAssign {
		t.Fatalf("grab: %v %v", p, err)
	}
	handle := p.Args[0]
	const chunks, size = 32, 256 << 10 // 8 MiB
	for i := 0; i < chunks; i++ {
		data := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		if _, err := w.Write(codec.AppendPacket(nil, codec.Req, codec.WorkData, handle, data)); err != nil {
			t.Fatalf("worker write %d: %v", i, err)
		}
	}
	// The worker's connection is served while the client's output waits.
	w.Write(codec.AppendPacket(nil, codec.Req, codec.EchoReq, []byte("alive")))
	if p, err := readPacket(wr); err != nil || p.Type != codec.EchoRes {
		t.Fatalf("worker echo: %v %v", p, err)
	}
	w.Write(codec.AppendPacket(nil, codec.Req, codec.WorkComplete, handle, []byte("done")))
	for i := 0; i < chunks; i++ {
		p, err := readPacket(cr)
		if err != nil || p.Type != codec.WorkData || len(p.Args[1]) != size || p.Args[1][0] != byte('a'+i%26) || p.Args[1][size-1] != byte('a'+i%26) {
			t.Fatalf("chunk %d: %v %v", i, p.Type, err)
		}
	}
	if p, err := readPacket(cr); err != nil || p.Type != codec.WorkComplete || string(p.Args[1]) != "done" {
		t.Fatalf("complete: %v %v", p, err)
	}
}
