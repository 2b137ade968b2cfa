//go:build linux

package proxy_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/proxy"
)

// Large bodies on the loop: a put body of 4 KiB or more that has not all
// arrived is read into the job's own buffer, and RESERVED/FOUND bodies of
// 2 KiB or more are written from the job with writev
// (proxy/beanstalk_loop_out_linux.go). These tests hold both paths to the
// bytes a client sees.

// bsPutSplit sends put on c in two writes split at s, with a round trip
// on sync between them: the loop serves ready sockets in the order they
// became ready, so it has read the first piece before it answers sync.
func bsPutSplit(t *testing.T, c, sync *bsConn, put string, s int) {
	t.Helper()
	c.send(t, put[:s])
	bsRoundTrip(t, sync, "list-tube-used\r\n", "USING default\r\n")
	c.send(t, put[s:])
}

// TestBeanstalkLoopBodySplitEveryOffset: a put of exactly the maximum job
// size, split across two reads at every offset, is stored whole (the next
// reserve gives it back byte for byte), and one byte over is JOB_TOO_BIG
// wherever it is split; the command behind either is served.
func TestBeanstalkLoopBodySplitEveryOffset(t *testing.T) {
	const maxJob = 4200 // above the loop's 4096-byte direct reads
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: bsGoroutines(t), EngineConfig: engine.Config{MaxJobSize: maxJob}})
		c := bsDial(t, addr)
		defer c.nc.Close()
		sync := bsDial(t, addr)
		defer sync.nc.Close()
		body := make([]byte, maxJob)
		for i := range body {
			body[i] = "ab\r\nz"[i%5] // "\r\n" inside, as binary bodies have
		}
		put := fmt.Sprintf("put 0 0 10 %d\r\n%s\r\n", maxJob, body)
		for s := 1; s < len(put); s++ {
			bsPutSplit(t, c, sync, put+"list-tube-used\r\n", s)
			c.expect(t, "INSERTED {n}\r\nUSING default\r\n", fmt.Sprintf("put split at %d", s))
			c.send(t, "reserve\r\n")
			if got, want := c.readReply(t), fmt.Sprintf("RESERVED %d %d\r\n%s\r\n", s, maxJob, body); got != want {
				t.Fatalf("split at %d: reserved %.60q..., want %.60q...", s, got, want)
			}
			bsRoundTrip(t, c, fmt.Sprintf("delete %d\r\n", s), "DELETED\r\n")
		}
		over := fmt.Sprintf("put 0 0 10 %d\r\n%s\r\n", maxJob+1, strings.Repeat("x", maxJob+1))
		for s := 1; s < len(over); s += 61 {
			bsPutSplit(t, c, sync, over+"list-tube-used\r\n", s)
			c.expect(t, "JOB_TOO_BIG\r\nUSING default\r\n", fmt.Sprintf("put one over split at %d", s))
		}
	})
}

// TestBeanstalkLoopBodyNoCRLF: a large body not followed by "\r\n" is
// EXPECTED_CRLF, as from beanstalkd, whether or not it came in pieces.
func TestBeanstalkLoopBodyNoCRLF(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: bsGoroutines(t)})
		c := bsDial(t, addr)
		defer c.nc.Close()
		sync := bsDial(t, addr)
		defer sync.nc.Close()
		put := fmt.Sprintf("put 0 0 10 %d\r\n%sXY", 10000, strings.Repeat("x", 10000))
		for _, s := range []int{17, 5000, len(put) - 2, len(put) - 1} {
			bsPutSplit(t, c, sync, put+"list-tube-used\r\n", s)
			c.expect(t, "EXPECTED_CRLF\r\nUSING default\r\n", fmt.Sprintf("split at %d", s))
		}
	})
}

// TestBeanstalkLoopCloseMidBody: a client that closes its side in the
// middle of a large body gets no reply and is closed; no job is made, and
// the server goes on serving.
func TestBeanstalkLoopCloseMidBody(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr, _ := bsServe(t, proxy.BeanstalkConfig{Goroutines: bsGoroutines(t)})
		sync := bsDial(t, addr)
		defer sync.nc.Close()
		for _, s := range []int{100, 9000} {
			c := bsDial(t, addr)
			bsPutSplit(t, c, sync, fmt.Sprintf("put 0 0 10 20000\r\n%s", strings.Repeat("x", 20000)), s)
			c.nc.(*net.TCPConn).CloseWrite()
			c.expectEOF(t, fmt.Sprintf("closed %d bytes into the put", s))
			c.nc.Close()
		}
		bsRoundTrip(t, sync, "stats-tube default\r\n", "OK {n}\r\n---\nname: default\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\n{...}",
			"put 0 0 10 1\r\na\r\n", "INSERTED {n}\r\n")
	})
}

// TestBeanstalkLoopBodiesBackUp: replies with bodies on both sides of the
// writev threshold, mixed with small replies and pipelined, reach a
// client that reads slowly from a small window byte for byte, in order,
// however the partial writes cut them.
func TestBeanstalkLoopBodiesBackUp(t *testing.T) {
	bsBothPaths(t, func(t *testing.T) {
		addr := bsServeSmallSend(t, proxy.BeanstalkConfig{})
		p := bsDial(t, addr)
		defer p.nc.Close()
		sizes := []int{1, 2047, 2048, 2049, 5000, 65535}
		var bodies []string
		for i, n := range sizes {
			b := strings.Repeat(string(rune('a'+i)), n)
			bodies = append(bodies, b)
			bsRoundTrip(t, p, fmt.Sprintf("put 0 0 10 %d\r\n%s\r\n", n, b), fmt.Sprintf("INSERTED %d\r\n", i+1))
		}
		c := bsDialSmallBuffer(t, addr)
		defer c.nc.Close()
		var cmds, want strings.Builder
		for range 20 {
			for i, b := range bodies {
				fmt.Fprintf(&cmds, "peek %d\r\nlist-tube-used\r\n", i+1)
				fmt.Fprintf(&want, "FOUND %d %d\r\n%s\r\nUSING default\r\n", i+1, len(b), b)
			}
		}
		c.send(t, cmds.String()+"quit\r\n")
		if got := bsReadSlowly(t, c.nc); got != want.String() {
			i := 0
			for i < len(got) && i < len(want.String()) && got[i] == want.String()[i] {
				i++
			}
			t.Fatalf("got %d bytes, want %d; they differ from byte %d", len(got), want.Len(), i)
		}
	})
}

// TestBeanstalkGoClientLargeBodies: go-beanstalk puts and reserves binary
// bodies on both sides of the loop's direct-read (4 KiB) and writev
// (2 KiB) thresholds, up to the maximum job size, against jobgate on both
// paths and against beanstalkd; one byte over is ErrJobTooBig on all.
func TestBeanstalkGoClientLargeBodies(t *testing.T) {
	for _, start := range []func(testing.TB, int) bsServer{bsStartJobgate, bsStartJobgateGoroutines, bsStartReal} {
		srv := start(t, 0)
		t.Run(srv.name, func(t *testing.T) {
			c, err := gobeanstalk.DialTimeout("tcp", srv.addr, bsReplyTimeout)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, n := range []int{2047, 2048, 4095, 4096, 16384, 65535} {
				body := make([]byte, n)
				for i := range body {
					body[i] = byte(i*7) ^ "\r\n"[i%2]
				}
				id, err := c.Put(body, 1, 0, time.Minute)
				if err != nil {
					t.Fatalf("put %d bytes: %v", n, err)
				}
				if got, err := c.Peek(id); err != nil || !bytes.Equal(got, body) {
					t.Fatalf("peek %d bytes: %d bytes %v", n, len(got), err)
				}
				rid, got, err := c.Reserve(bsReplyTimeout)
				if err != nil || rid != id || !bytes.Equal(got, body) {
					t.Fatalf("reserve %d bytes: %d %d bytes %v", n, rid, len(got), err)
				}
				if err := c.Delete(id); err != nil {
					t.Fatalf("delete: %v", err)
				}
			}
			if _, err := c.Put(make([]byte, 65536), 1, 0, time.Minute); !errors.Is(err, gobeanstalk.ErrJobTooBig) {
				t.Fatalf("put one byte over the maximum: %v, want ErrJobTooBig", err)
			}
		})
	}
}
