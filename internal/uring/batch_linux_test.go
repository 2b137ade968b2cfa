package uring

import (
	"bytes"
	"math/rand"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/epoll"
)

// socketPair returns the two ends of a loopback TCP connection as
// non-blocking descriptors the test owns.
func socketPair(t testing.TB) (int, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c1, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c2, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	fds := [2]int{}
	for i, c := range []net.Conn{c1, c2} {
		fd, err := epoll.DupConn(c.(*net.TCPConn))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		fds[i] = fd
		t.Cleanup(func() { syscall.Close(fd) })
	}
	return fds[0], fds[1]
}

// batches returns a batch on io_uring (skipping the test where the
// kernel refuses one) and one making plain calls.
func batches(t *testing.T) map[string]*Batch {
	t.Helper()
	ring := New()
	t.Cleanup(ring.Close)
	if !ring.Ring() {
		t.Skip("io_uring unavailable here")
	}
	Disable(true)
	plain := New()
	Disable(false)
	if plain.Ring() {
		t.Fatal("Disable(true) still gave a ring")
	}
	return map[string]*Batch{"ring": ring, "plain": plain}
}

func iovOf(ps ...[]byte) []syscall.Iovec {
	var iov []syscall.Iovec
	for _, p := range ps {
		v := syscall.Iovec{Base: &p[0]}
		v.SetLen(len(p))
		iov = append(iov, v)
	}
	return iov
}

// TestBatchResults: every operation reports what the plain call does,
// whole, partial, EAGAIN, end of input and errors, with the ring and
// without it.
func TestBatchResults(t *testing.T) {
	for name, b := range batches(t) {
		t.Run(name, func(t *testing.T) {
			a1, b1 := socketPair(t)
			a2, b2 := socketPair(t)
			rd1, rd2 := make([]byte, 64), make([]byte, 64)

			b.Reset()
			w1 := b.Write(a1, []byte("hello"))
			w2 := b.Writev(a2, iovOf([]byte("ab"), []byte("cd")))
			e1 := b.Read(b1, rd1)
			b.Run()
			for i, want := range []int{5, 4} {
				if n, err := b.Result([]int{w1, w2}[i]); n != want || err != nil {
					t.Fatalf("write %d: %d, %v", i, n, err)
				}
			}
			// b1 had "hello" only if the write ran first: operations run in
			// the order queued.
			if n, err := b.Result(e1); n != 5 || err != nil || string(rd1[:5]) != "hello" {
				t.Fatalf("read after write in one batch: %d %v %q", n, err, rd1[:n])
			}

			b.Reset()
			r2 := b.Readv(b2, rd2[:1], rd2[1:])
			empty := b.Read(b1, rd1)
			b.Run()
			if n, err := b.Result(r2); n != 4 || err != nil || string(rd2[:4]) != "abcd" {
				t.Fatalf("readv: %d %v %q", n, err, rd2[:n])
			}
			if n, err := b.Result(empty); n != 0 || err != syscall.EAGAIN {
				t.Fatalf("read of an empty socket: %d, %v; want EAGAIN", n, err)
			}

			// A full socket: a write takes part, then nothing, as (0, nil).
			big := make([]byte, 8<<20)
			b.Reset()
			k := b.Write(a1, big)
			b.Run()
			n, err := b.Result(k)
			if err != nil || n <= 0 || n >= len(big) {
				t.Fatalf("large write: %d, %v; want a part", n, err)
			}
			b.Reset()
			k = b.Write(a1, big)
			v := b.Writev(a1, iovOf(big[:1]))
			b.Run()
			for _, i := range []int{k, v} {
				if n, err := b.Result(i); n != 0 || err != nil {
					t.Fatalf("write to a full socket: %d, %v; want 0, nil", n, err)
				}
			}

			// End of input, and a write to a peer that has gone.
			syscall.Close(a2)
			syscall.Shutdown(b2, syscall.SHUT_RD)
			b.Reset()
			eof := b.Read(b2, rd2)
			b.Run()
			if n, err := b.Result(eof); n != 0 || err != nil {
				t.Fatalf("read at end of input: %d, %v; want 0, nil", n, err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				b.Reset()
				k := b.Write(b2, []byte("x"))
				k2 := b.Write(b2, []byte("y"))
				b.Run()
				_, err1 := b.Result(k)
				_, err2 := b.Result(k2)
				if err1 == syscall.EPIPE || err2 == syscall.EPIPE || err1 == syscall.ECONNRESET || err2 == syscall.ECONNRESET {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("writes to a closed peer kept succeeding: %v %v", err1, err2)
				}
			}

			// Not a socket: a pipe goes through the plain calls.
			var pfd [2]int
			if err := syscall.Pipe2(pfd[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(pfd[0])
			defer syscall.Close(pfd[1])
			b.Reset()
			pw := b.Write(pfd[1], []byte("pipe"))
			pr := b.Read(pfd[0], rd1)
			b.Run()
			if n, err := b.Result(pw); n != 4 || err != nil {
				t.Fatalf("pipe write: %d, %v", n, err)
			}
			if n, err := b.Result(pr); n != 4 || err != nil || string(rd1[:4]) != "pipe" {
				t.Fatalf("pipe read: %d, %v %q", n, err, rd1[:n])
			}

			// A closed descriptor, and empty operations.
			b.Reset()
			bad := b.Write(a2, []byte("x"))
			none := b.Read(b1, nil)
			b.Run()
			if _, err := b.Result(bad); err != syscall.EBADF {
				t.Fatalf("write to a closed descriptor: %v; want EBADF", err)
			}
			if n, err := b.Result(none); n != 0 || err != nil {
				t.Fatalf("empty read: %d, %v", n, err)
			}
		})
	}
}

// TestBatchLarge: a batch larger than the ring runs in several
// submissions, in the order queued: every socket receives exactly its
// writes, in order, and batched reads drain them.
func TestBatchLarge(t *testing.T) {
	for name, b := range batches(t) {
		t.Run(name, func(t *testing.T) {
			const pairs = 8
			var out, in [pairs]int
			for i := range pairs {
				out[i], in[i] = socketPair(t)
			}
			rng := rand.New(rand.NewSource(1))
			var sent, got [pairs]bytes.Buffer
			var bufs [pairs][]byte
			for i := range bufs {
				bufs[i] = make([]byte, 1<<16)
			}
			for round := 0; round < 20; round++ {
				b.Reset()
				var msgs [][]byte
				var idx []int
				for k := 0; k < 3*maxEntries; k++ {
					i := rng.Intn(pairs)
					m := make([]byte, 1+rng.Intn(300))
					rng.Read(m)
					sent[i].Write(m)
					msgs = append(msgs, m)
					idx = append(idx, b.Write(out[i], m))
				}
				b.Run()
				for k, j := range idx {
					if n, err := b.Result(j); err != nil || n != len(msgs[k]) {
						t.Fatalf("round %d write %d: %d of %d, %v", round, k, n, len(msgs[k]), err)
					}
				}
				for busy := true; busy; {
					busy = false
					b.Reset()
					var rd [pairs]int
					for i := range pairs {
						rd[i] = b.Read(in[i], bufs[i])
					}
					b.Run()
					for i := range pairs {
						n, err := b.Result(rd[i])
						if err == syscall.EAGAIN {
							continue
						}
						if err != nil || n == 0 {
							t.Fatalf("read: %d, %v", n, err)
						}
						got[i].Write(bufs[i][:n])
						busy = true
					}
				}
			}
			for i := range pairs {
				if !bytes.Equal(got[i].Bytes(), sent[i].Bytes()) {
					t.Fatalf("socket %d: received %d bytes unlike the %d sent", i, got[i].Len(), sent[i].Len())
				}
			}
		})
	}
}

// BenchmarkBatch: eight loopback sends and the eight reads of them, per
// operation, through one batch each or through the plain calls.
func BenchmarkBatch(b *testing.B) {
	for _, ring := range []bool{true, false} {
		name := "plain"
		if ring {
			name = "ring"
		}
		b.Run(name, func(b *testing.B) {
			Disable(!ring)
			io := New()
			Disable(false)
			defer io.Close()
			if ring && !io.Ring() {
				b.Skip("io_uring unavailable here")
			}
			const pairs = 8
			var out, in [pairs]int
			for i := range pairs {
				out[i], in[i] = socketPair(b)
			}
			msg, buf := make([]byte, 100), make([]byte, 4096)
			b.ResetTimer()
			for range b.N {
				io.Reset()
				for i := range pairs {
					io.Write(out[i], msg)
				}
				io.Run()
				io.Reset()
				for i := range pairs {
					io.Read(in[i], buf)
				}
				io.Run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*pairs), "ns/op")
		})
	}
}

// TestBatchNeverWaits: on a kernel that parks an operation to wait for
// its socket instead of answering EAGAIN (simulated: no MSG_DONTWAIT),
// Run cancels it and reports EAGAIN (a write: nothing taken) at once; the
// other operations of the batch keep their results, and no byte is lost
// or written twice.
func TestBatchNeverWaits(t *testing.T) {
	b := New()
	defer b.Close()
	if !b.Ring() {
		t.Skip("io_uring unavailable here")
	}
	dontWait = 0
	defer func() { dontWait = syscall.MSG_DONTWAIT }()
	w1, r1 := socketPair(t) // w1 full
	w2, r2 := socketPair(t) // nothing sent
	w3, r3 := socketPair(t) // "ready" sent
	sent := 0
	chunk := make([]byte, 1<<20)
	for {
		n, err := syscall.Write(w1, chunk)
		if err == syscall.EAGAIN {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sent += n
	}
	if _, err := syscall.Write(w3, []byte("ready")); err != nil {
		t.Fatal(err)
	}
	rd2, rd3 := make([]byte, 64), make([]byte, 64)
	var ready [1]syscall.EpollEvent
	waitReadable(t, r3, ready[:])

	start := time.Now()
	b.Reset()
	parkedWrite := b.Write(w1, []byte("more"))
	parkedRead := b.Read(r2, rd2)
	got := b.Read(r3, rd3)
	b.Run()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Run took %v", d)
	}
	if n, err := b.Result(got); n != 5 || err != nil || string(rd3[:5]) != "ready" {
		t.Fatalf("read with data: %d, %v", n, err)
	}
	if n, err := b.Result(parkedWrite); n != 0 || err != nil {
		t.Fatalf("write to a full socket: %d, %v; want 0, nil", n, err)
	}
	if n, err := b.Result(parkedRead); n != 0 || err != syscall.EAGAIN {
		t.Fatalf("read of an empty socket: %d, %v; want EAGAIN", n, err)
	}

	// The sockets go on: the cancelled read took nothing from r2, and the
	// cancelled write put nothing on w1.
	if _, err := syscall.Write(w2, []byte("after")); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, r2, ready[:])
	if n, err := syscall.Read(r2, rd2); n != 5 || err != nil || string(rd2[:5]) != "after" {
		t.Fatalf("r2 after the cancel: %d, %v %q", n, err, rd2[:max(n, 0)])
	}
	total := 0
	deadline := time.Now().Add(10 * time.Second)
	for total < sent+1 && time.Now().Before(deadline) {
		n, err := syscall.Read(r1, chunk)
		if err == syscall.EAGAIN {
			if total == sent {
				break // all there is
			}
			waitReadable(t, r1, ready[:])
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != sent {
		t.Fatalf("r1 received %d bytes, %d were sent before the cancelled write", total, sent)
	}
}

// waitReadable waits up to 5s for fd to be readable.
func waitReadable(t *testing.T, fd int, evs []syscall.EpollEvent) {
	t.Helper()
	p, err := epoll.New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Add(fd, epoll.In, 1); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.Wait(evs, 5000); n == 0 {
		t.Fatal("not readable within 5s")
	}
}
