package connlimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection whose socket
// buffers are as small as Linux allows (server send, client receive), so
// a client that does not read fills them after a few KiB and the Writer's
// own queue takes the rest: the test's outcome does not depend on how much
// the kernel would otherwise absorb.
func tcpPair(t *testing.T) (server *net.TCPConn, client *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		// Before connect, so the advertised window is small too.
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	c, err := d.DialContext(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server, client = s.(*net.TCPConn), c.(*net.TCPConn)
	if err := server.SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// cutoffs records OnCutoff calls.
type cutoffs struct {
	mu sync.Mutex
	rs []Reason
}

func (c *cutoffs) record(r Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rs = append(c.rs, r)
}

func (c *cutoffs) get() []Reason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Reason(nil), c.rs...)
}

// TestWriterSlowReaderCutOff: a peer that never reads is cut off once the
// unsent output passes the limit, and not before.
func TestWriterSlowReaderCutOff(t *testing.T) {
	const limit, chunk = 256 << 10, 1 << 10
	server, _ := tcpPair(t) // the client never reads
	var cut cutoffs
	w := NewWriter(server, WriterOptions{Limit: limit, WriteTimeout: time.Minute, OnCutoff: cut.record})

	p := bytes.Repeat([]byte("x"), chunk)
	accepted := 0
	var err error
	for accepted < 64<<20 {
		if _, err = w.Write(p); err != nil {
			break
		}
		accepted += chunk
	}
	if !errors.Is(err, ErrSlowReader) {
		t.Fatalf("after %d bytes: Write error %v, want ErrSlowReader", accepted, err)
	}
	if accepted < limit-chunk {
		t.Errorf("cut off after %d bytes, before the %d limit", accepted, limit)
	}
	<-w.Done()
	if got := cut.get(); len(got) != 1 || got[0] != ReasonSlowReader {
		t.Errorf("OnCutoff calls %v, want [slow_reader]", got)
	}
	if _, err := w.Write(p); !errors.Is(err, ErrSlowReader) {
		t.Errorf("Write after cut-off: %v", err)
	}
	if w.Buffered() != 0 {
		t.Errorf("%d bytes still held after cut-off", w.Buffered())
	}
	if _, err := server.Write(p); !errors.Is(err, net.ErrClosed) {
		t.Errorf("connection not closed by the cut-off: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrSlowReader) {
		t.Errorf("Close after cut-off: %v", err)
	}
}

// TestWriterOneBigWriteThenCut: one write larger than the limit is taken
// into an empty queue; the next one, with the first stuck, is not.
func TestWriterOneBigWriteThenCut(t *testing.T) {
	const limit = 256 << 10
	server, _ := tcpPair(t)
	var cut cutoffs
	w := NewWriter(server, WriterOptions{Limit: limit, OnCutoff: cut.record})
	if _, err := w.Write(make([]byte, 4*limit)); err != nil {
		t.Fatalf("oversized first write: %v", err)
	}
	// The socket buffers hold a few KiB; most of the 1MiB stays unsent.
	if _, err := w.Write([]byte("!")); !errors.Is(err, ErrSlowReader) {
		t.Fatalf("second write: %v, want ErrSlowReader", err)
	}
	<-w.Done()
	if got := cut.get(); len(got) != 1 || got[0] != ReasonSlowReader {
		t.Errorf("OnCutoff calls %v", got)
	}
}

// TestWriterWriteTimeout: with no limit, a write stalled for the timeout
// cuts the client off.
func TestWriterWriteTimeout(t *testing.T) {
	server, _ := tcpPair(t)
	var cut cutoffs
	w := NewWriter(server, WriterOptions{WriteTimeout: 50 * time.Millisecond, OnCutoff: cut.record})
	if _, err := w.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	<-w.Done() // the socket deadline, real time, ends it
	if !errors.Is(w.Err(), ErrWriteTimeout) {
		t.Errorf("Err = %v, want ErrWriteTimeout", w.Err())
	}
	if got := cut.get(); len(got) != 1 || got[0] != ReasonWriteTimeout {
		t.Errorf("OnCutoff calls %v, want [write_timeout]", got)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrWriteTimeout) {
		t.Errorf("Write after timeout: %v", err)
	}
}

// TestWriterDelivers: a peer that reads gets every byte in order, across
// writers on several goroutines, and Close flushes before closing.
func TestWriterDelivers(t *testing.T) {
	server, client := tcpPair(t)
	var cut cutoffs
	w := NewWriter(server, WriterOptions{Limit: 64 << 20, WriteTimeout: 10 * time.Second, OnCutoff: cut.record})
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	const producers, lines = 4, 2000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range lines {
				if _, err := fmt.Fprintf(w, "p%d line %05d\n", p, i); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := w.Write([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	b := <-got
	// Each producer's lines arrive whole and in its order.
	next := make([]int, producers)
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var p, i int
		if _, err := fmt.Sscanf(string(line), "p%d line %d", &p, &i); err != nil || p >= producers || i != next[p] {
			t.Fatalf("line %q out of order (next %v)", line, next)
		}
		next[p]++
	}
	for p, n := range next {
		if n != lines {
			t.Errorf("producer %d: %d lines arrived, want %d", p, n, lines)
		}
	}
	if len(cut.get()) != 0 {
		t.Errorf("cut off a reading client: %v", cut.get())
	}
}

// TestWriterPeerGone: a peer that closes is an ordinary write error, not a
// cut-off.
func TestWriterPeerGone(t *testing.T) {
	server, client := tcpPair(t)
	var cut cutoffs
	w := NewWriter(server, WriterOptions{WriteTimeout: 10 * time.Second, OnCutoff: cut.record})
	client.Close()
	p := make([]byte, 4096)
	for {
		if _, err := w.Write(p); err != nil {
			if errors.Is(err, ErrSlowReader) || errors.Is(err, ErrWriteTimeout) || errors.Is(err, ErrClosed) {
				t.Fatalf("Write: %v, want the socket's error", err)
			}
			break
		}
		select {
		case <-w.Done():
		default:
			continue
		}
	}
	<-w.Done()
	if len(cut.get()) != 0 {
		t.Errorf("OnCutoff called for a vanished peer: %v", cut.get())
	}
}

func TestWriterAbort(t *testing.T) {
	server, _ := tcpPair(t)
	w := NewWriter(server, WriterOptions{})
	w.Write(make([]byte, 1<<20)) // stuck: the peer does not read, and no timeout
	w.Abort()                    // returns anyway
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Abort: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close after Abort: %v", err)
	}
}

// BenchmarkWriterWrite measures queuing a 64-byte reply for a peer that
// reads; the steady state reuses buffers.
func BenchmarkWriterWrite(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	w := NewWriter(c, WriterOptions{Limit: 16 << 20, WriteTimeout: 30 * time.Second})
	defer w.Close()
	p := bytes.Repeat([]byte("r"), 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := w.Write(p); err != nil {
			b.Fatal(err)
		}
	}
}
