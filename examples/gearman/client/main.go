// Command client is an example Gearman client written on jobgate's codec.
//
// By default it submits a foreground job (SUBMIT_JOB) and prints what the
// worker streams back (WORK_STATUS, WORK_DATA) and the result
// (WORK_COMPLETE). With -bg it queues a background job (SUBMIT_JOB_BG),
// prints its handle, and asks for its status (GET_STATUS); -status HANDLE
// asks again later. The protocol code is in package gmexample.
//
//	go run ./examples/gearman/client -f reverse hello
//	go run ./examples/gearman/client -bg -f reverse hello
//	go run ./examples/gearman/client -status H:myhost:1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jobgate/jobgate/examples/gearman/gmexample"
)

func main() {
	var cfg gmexample.ClientConfig
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:4730", "Gearman server `host:port`")
	flag.StringVar(&cfg.Function, "f", "reverse", "`function` to submit the job to")
	flag.BoolVar(&cfg.Background, "bg", false, "submit a background job, print its handle and status, and exit")
	flag.StringVar(&cfg.StatusOf, "status", "", "print the status of the job with this `handle` and exit")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: client [flags] payload words...")
		flag.PrintDefaults()
	}
	flag.Parse()
	cfg.Payload = []byte(strings.Join(flag.Args(), " "))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := gmexample.RunClient(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}
