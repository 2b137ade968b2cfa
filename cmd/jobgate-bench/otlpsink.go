package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// runOTLPSink is "jobgate-bench otlp-sink": an OTLP/HTTP trace receiver
// that reads every export, counts its spans and discards it, so that a
// benchmark of jobgate with tracing on measures jobgate's side of tracing,
// not a collector's. It prints its address, and on SIGINT/SIGTERM how many
// requests, body bytes and spans it received.
//
// The sink shares the benchmark's CPUs with the server it measures, where
// a real collector would run on another host, so it is built to cost as
// little as it can: no net/http, and on Unix each connection is read and
// written with blocking raw system calls (otlpsink_unix.go).
func runOTLPSink(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jobgate-bench otlp-sink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:4318", "listen `address`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	prepareSinkRuntime()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "jobgate-bench otlp-sink: %v\n", err)
		return 1
	}
	sink := newOTLPSink()
	fmt.Fprintf(stdout, "otlp-sink listening on %s\n", l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; sink.Close(l) }()
	sink.Serve(l)
	fmt.Fprintf(stdout, "otlp-sink requests=%d bytes=%d spans=%d bad=%d\n",
		sink.requests.Load(), sink.bytes.Load(), sink.spans.Load(), sink.bad.Load())
	return 0
}

// sinkConn is a connection the sink serves.
type sinkConn interface {
	io.ReadWriter
	// shutdown ends a read blocked on the connection; close releases it.
	shutdown()
	close()
}

// otlpSink answers every well-formed POST 200 with an empty
// ExportTraceServiceResponse (which encodes to no bytes) after reading its
// body, counting requests, body bytes and the spans in the bodies.
type otlpSink struct {
	requests, bytes, spans atomic.Int64
	// bad counts requests answered with an error (400, 411, 413) and bodies
	// that are not an ExportTraceServiceRequest (answered 200, their spans
	// not counted).
	bad atomic.Int64

	mu     sync.Mutex
	conns  map[sinkConn]bool // connections being served, shut down by Close
	free   [][]byte          // read buffers of ended connections, for new ones
	closed bool
	wg     sync.WaitGroup
}

func newOTLPSink() *otlpSink {
	return &otlpSink{conns: make(map[sinkConn]bool)}
}

// Serve accepts connections on l until it is closed and serves each on
// its own goroutine; it returns when l is closed and every connection has
// ended.
func (s *otlpSink) Serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		conn, err := newSinkConn(c)
		if err != nil {
			continue
		}
		if !s.track(conn) {
			conn.close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
			s.untrack(conn)
			conn.close()
		}()
	}
	s.wg.Wait()
}

// Close stops l and shuts down every connection being served, which ends
// their blocked reads.
func (s *otlpSink) Close(l net.Listener) {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	l.Close()
}

func (s *otlpSink) track(c sinkConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.conns) >= sinkMaxConns {
		return false
	}
	s.conns[c] = true
	return true
}

func (s *otlpSink) untrack(c sinkConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// takeBuffer returns a read buffer of an ended connection, or a new one.
// Buffers are reused rather than left to the garbage collector, which may
// be off (prepareSinkRuntime).
func (s *otlpSink) takeBuffer() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		buf := s.free[n-1]
		s.free = s.free[:n-1]
		return buf
	}
	return make([]byte, sinkReadSize)
}

// putBuffer keeps buf for a later connection.
func (s *otlpSink) putBuffer(buf []byte) {
	s.mu.Lock()
	s.free = append(s.free, buf)
	s.mu.Unlock()
}
