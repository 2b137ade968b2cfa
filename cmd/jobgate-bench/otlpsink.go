package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
)

// runOTLPSink is "jobgate-bench otlp-sink": an OTLP/HTTP trace receiver
// that reads and discards every export, so that a benchmark of jobgate
// with tracing on measures jobgate's side of tracing, not a collector's.
// It prints its address, and on SIGINT/SIGTERM how many requests and bytes
// it received.
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
	// The sink shares the benchmark's CPUs with the server it measures.
	// One P keeps the runtime from waking a second thread for every
	// request it reads (a third of the sink's CPU with the default).
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "jobgate-bench otlp-sink: %v\n", err)
		return 1
	}
	sink := newOTLPSink()
	srv := &http.Server{Handler: sink}
	fmt.Fprintf(stdout, "otlp-sink listening on %s\n", l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; srv.Close() }()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "jobgate-bench otlp-sink: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "otlp-sink requests=%d bytes=%d\n", sink.requests.Load(), sink.bytes.Load())
	return 0
}

// sinkReadSize is the sink's read buffer. The server's buffered reader
// hands reads this large straight to the socket, so a batch of a few
// hundred spans takes a few read calls instead of one per 8 KiB (what
// io.Copy to io.Discard would use).
const sinkReadSize = 1 << 20

// otlpSink answers every request 200 with an empty
// ExportTraceServiceResponse after reading its body to the end, counting
// requests and body bytes.
type otlpSink struct {
	requests, bytes atomic.Int64
	bufs            sync.Pool
}

func newOTLPSink() *otlpSink {
	s := &otlpSink{}
	s.bufs.New = func() any { b := make([]byte, sinkReadSize); return &b }
	return s
}

// ServeHTTP implements http.Handler.
func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := s.bufs.Get().(*[]byte)
	n := discardBody(r.Body, *buf)
	s.bufs.Put(buf)
	s.requests.Add(1)
	s.bytes.Add(n)
	// An empty ExportTraceServiceResponse encodes to no bytes.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// discardBody reads body to its end into buf and returns how many bytes
// it read.
func discardBody(body io.Reader, buf []byte) int64 {
	var n int64
	for {
		m, err := body.Read(buf)
		n += int64(m)
		if err != nil {
			return n
		}
	}
}
