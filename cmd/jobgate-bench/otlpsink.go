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
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "jobgate-bench otlp-sink: %v\n", err)
		return 1
	}
	var reqs, bytes atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		reqs.Add(1)
		bytes.Add(n)
		// An empty ExportTraceServiceResponse encodes to no bytes.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	fmt.Fprintf(stdout, "otlp-sink listening on %s\n", l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; srv.Close() }()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "jobgate-bench otlp-sink: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "otlp-sink requests=%d bytes=%d\n", reqs.Load(), bytes.Load())
	return 0
}
