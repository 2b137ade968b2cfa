package proxy_test

import (
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil/authtest"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/proxy"
)

// The Beanstalk server serves plain TCP connections from an epoll loop on
// Linux and from a goroutine each with BeanstalkConfig.Goroutines (and for
// TLS, a gateway or a journal). The suites run on both: bsBothPaths runs a
// test as subtests "loop" and "goroutines", and the helpers that start a
// jobgate server (bsServeStop, bsStartAuth, startLimitedBeanstalk, ...)
// set Goroutines inside "goroutines" (bsGoroutines).

// bsBothPaths runs f as the subtests "loop" and "goroutines".
func bsBothPaths(t *testing.T, f func(t *testing.T)) {
	t.Run("loop", f)
	t.Run("goroutines", f)
}

// bsGoroutines reports whether t runs under bsBothPaths' "goroutines".
func bsGoroutines(t testing.TB) bool {
	return slices.Contains(strings.Split(t.Name(), "/"), "goroutines")
}

// bsStartJobgateGoroutines is bsStartJobgate on the goroutine path, for
// the suites that list the servers they run on.
func bsStartJobgateGoroutines(t testing.TB, maxJobSize int) bsServer {
	t.Helper()
	addr, srv := bsServe(t, proxy.BeanstalkConfig{
		EngineConfig: engine.Config{MaxJobSize: maxJobSize},
		Goroutines:   true,
	})
	return bsServer{
		name:  "jobgate-goroutines",
		addr:  addr,
		drain: func(*testing.T) { srv.Engine().SetDraining(true) },
	}
}

// TestBeanstalkLoopNoGoroutinePerConn: on the loop, connections, even with
// reserves waiting, cost no goroutine; on the goroutine path each costs
// one (which shows the test can tell the two apart).
func TestBeanstalkLoopNoGoroutinePerConn(t *testing.T) {
	const n = 40
	for _, goroutines := range []bool{false, true} {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: goroutines})
		// The first connection starts the loop goroutine.
		first := bsDial(t, addr)
		defer first.nc.Close()
		bsRoundTrip(t, first, "list-tube-used\r\n", "USING default\r\n")
		base := runtime.NumGoroutine()
		for range n {
			c := bsDial(t, addr)
			defer c.nc.Close()
			c.send(t, "list-tube-used\r\nreserve-with-timeout 100\r\n")
			c.expect(t, "USING default\r\n", "before the reserve")
		}
		grown := runtime.NumGoroutine() - base
		if goroutines && grown < n {
			t.Fatalf("goroutine path: %d goroutines for %d connections, want one each", grown, n)
		}
		if !goroutines && grown > 5 {
			t.Fatalf("loop: %d goroutines for %d connections, want none", grown, n)
		}
	}
}

// TestBeanstalkLoopPipelinedBehindReserve: commands sent behind a reserve
// that waits are answered, in order, after its RESERVED.
func TestBeanstalkLoopPipelinedBehindReserve(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: bsGoroutines(t)})
		w := bsDial(t, addr)
		defer w.nc.Close()
		w.send(t, "reserve\r\nlist-tube-used\r\nput 0 0 10 1\r\nb\r\nreserve-with-timeout 0\r\n")
		w.expectQuiet(t, "reserve waiting")
		p := bsDial(t, addr)
		defer p.nc.Close()
		bsRoundTrip(t, p, "put 0 0 10 1\r\na\r\n", "INSERTED 1\r\n")
		w.expect(t, "RESERVED 1 1\r\na\r\nUSING default\r\nINSERTED 2\r\nRESERVED 2 1\r\nb\r\n", "reserve, then the rest")
	})
}

// TestBeanstalkLoopHalfCloseDuringReserve: a client that shuts its side
// while its reserve waits gets TIMED_OUT, then the replies to what it sent
// before, then EOF; the job put afterwards stays ready.
func TestBeanstalkLoopHalfCloseDuringReserve(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: bsGoroutines(t)})
		w := bsDial(t, addr)
		defer w.nc.Close()
		w.send(t, "reserve\r\nlist-tube-used\r\nreserve\r\n")
		w.expectQuiet(t, "reserve waiting")
		w.nc.(*net.TCPConn).CloseWrite()
		w.expect(t, "TIMED_OUT\r\nUSING default\r\nTIMED_OUT\r\n", "after the half-close")
		w.expectEOF(t, "after the replies")
		p := bsDial(t, addr)
		defer p.nc.Close()
		bsRoundTrip(t, p, "put 0 0 10 1\r\na\r\n", "INSERTED 1\r\n", "peek-ready\r\n", "FOUND 1 1\r\na\r\n")
	})
}

// TestBeanstalkLoopSlowReader: a client that pipelines commands whose
// replies far exceed the socket buffers and reads nothing gets them all,
// in order, once it reads; meanwhile the other clients are served.
func TestBeanstalkLoopSlowReader(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: bsGoroutines(t)})
		body := strings.Repeat("x", 60000)
		s := bsDial(t, addr)
		defer s.nc.Close()
		bsRoundTrip(t, s, fmt.Sprintf("put 0 0 10 %d\r\n%s\r\n", len(body), body), "INSERTED 1\r\n")
		const n = 300 // 18 MB of replies
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			s.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
			s.nc.Write([]byte(strings.Repeat("peek 1\r\n", n)))
		}()
		o := bsDial(t, addr)
		defer o.nc.Close()
		for range 20 {
			bsRoundTrip(t, o, "put 0 0 10 1\r\na\r\n", "INSERTED {n}\r\n", "list-tube-used\r\n", "USING default\r\n")
		}
		want := fmt.Sprintf("FOUND 1 %d\r\n%s\r\n", len(body), body)
		for i := range n {
			if got := s.readReply(t); got != want {
				t.Fatalf("reply %d of %d: %.40q, want FOUND 1 %d", i+1, n, got, len(body))
			}
		}
		<-sent
		bsRoundTrip(t, s, "list-tube-used\r\n", "USING default\r\n")
	})
}

// TestBeanstalkLoopBodyInPieces: a put whose body comes in many pieces,
// and one too big whose body is dropped as it comes, are answered as at
// once.
func TestBeanstalkLoopBodyInPieces(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: bsGoroutines(t), EngineConfig: engine.Config{MaxJobSize: 20000}})
		c := bsDial(t, addr)
		defer c.nc.Close()
		for _, size := range []int{15000, 50000} {
			c.send(t, fmt.Sprintf("put 0 0 10 %d\r\n", size))
			body := strings.Repeat("y", size) + "\r\n"
			for len(body) > 0 {
				k := min(len(body), 4000)
				c.send(t, body[:k])
				body = body[k:]
				time.Sleep(time.Millisecond) // pieces, not one segment; nothing waits on it
			}
		}
		c.expect(t, "INSERTED 1\r\nJOB_TOO_BIG\r\n", "whole body, dropped body")
		bsRoundTrip(t, c, "stats-job 1\r\n", "OK {n}\r\n---\nid: 1\n{...}")
	})
}

// TestBeanstalkLoopDeniedReserveHold: a denied reserve held back by auth
// parks only its own connection: another is served meanwhile, and the
// commands behind it follow its NOT_FOUND.
func TestBeanstalkLoopDeniedReserveHold(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		_, addr, _ := bsStartAuth(t, authtest.Policy(t, authtest.Config()), nil)
		c := bsDial(t, addr)
		defer c.nc.Close()
		c.send(t, "reserve\r\nlist-tube-used\r\n")
		o := bsDial(t, addr)
		defer o.nc.Close()
		bsRoundTrip(t, o, "list-tube-used\r\n", "USING default\r\n")
		c.expectQuiet(t, "reserve held (1 s) while the other client was served")
		c.expect(t, "NOT_FOUND\r\nUSING default\r\n", "held reserve, then the rest")
	})
}

// TestBeanstalkLoopJournalPipelined: with a journal (every write synced),
// pipelined changes are each acknowledged once durable, in order, with the
// commands between them, and a waiting reserve gets a job once durable.
func TestBeanstalkLoopJournalPipelined(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsStartDurable(t, t.TempDir(), journal.Always)
		c := bsDial(t, addr)
		defer c.nc.Close()
		c.send(t, "put 0 0 10 1\r\na\r\nput 0 0 10 1\r\nb\r\nlist-tube-used\r\ndelete 1\r\nstats-job 1\r\nreserve\r\nbury 2 5\r\n")
		c.expect(t, "INSERTED 1\r\nINSERTED 2\r\nUSING default\r\nDELETED\r\nNOT_FOUND\r\nRESERVED 2 1\r\nb\r\nBURIED\r\n", "pipelined")
		w := bsDial(t, addr)
		defer w.nc.Close()
		w.send(t, "reserve\r\n")
		w.expectQuiet(t, "reserve waiting")
		bsRoundTrip(t, c, "put 0 0 10 1\r\nc\r\n", "INSERTED 3\r\n")
		w.expect(t, "RESERVED 3 1\r\nc\r\n", "the job put once durable")
	})
}

// TestBeanstalkLoopReadAheadFull: more than the read-ahead limit pipelined
// behind a waiting reserve stops the reading until the reserve is
// answered; then every command is served, in order.
func TestBeanstalkLoopReadAheadFull(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: bsGoroutines(t)})
		w := bsDial(t, addr)
		defer w.nc.Close()
		const n = 20000 // 320 KB, past the 64 KiB read-ahead
		sent := make(chan error, 1)
		go func() {
			w.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
			_, err := w.nc.Write([]byte("reserve\r\n" + strings.Repeat("list-tube-used\r\n", n)))
			sent <- err
		}()
		w.expectQuiet(t, "reserve waiting")
		p := bsDial(t, addr)
		defer p.nc.Close()
		bsRoundTrip(t, p, "put 0 0 10 1\r\na\r\n", "INSERTED 1\r\n")
		w.expect(t, "RESERVED 1 1\r\na\r\n", "reserve")
		for i := range n {
			if got := w.readReply(t); got != "USING default\r\n" {
				t.Fatalf("reply %d of %d behind the reserve: %q", i+1, n, got)
			}
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	})
}
