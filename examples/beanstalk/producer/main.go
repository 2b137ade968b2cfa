// Command producer is an example Beanstalk producer using the go-beanstalk
// client: it puts -n jobs on a tube, each with a priority and an optional
// delay, and prints their ids. The code is in package bsexample.
//
//	go run ./examples/beanstalk/producer -tube demo -n 5 -body "hello %d"
//	go run ./examples/beanstalk/producer -tube demo -n 1 -body "later" -delay 5s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/examples/beanstalk/bsexample"
)

func main() {
	var cfg bsexample.ProducerConfig
	var pri uint
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:11300", "Beanstalk server `host:port`")
	flag.StringVar(&cfg.Tube, "tube", "default", "`tube` to put the jobs in")
	flag.IntVar(&cfg.N, "n", 10, "number of jobs to put")
	flag.StringVar(&cfg.Body, "body", "job %d", "job body, a `format` given the job's number (1, 2, ...)")
	flag.UintVar(&pri, "pri", 1024, "job `priority`: 0 is the most urgent")
	flag.DurationVar(&cfg.Delay, "delay", 0, "keep each job delayed this long before it is ready (whole seconds)")
	flag.DurationVar(&cfg.TTR, "ttr", time.Minute, "time a worker may hold a job before the server hands it to another")
	flag.Parse()
	if pri > 1<<32-1 {
		fmt.Fprintln(os.Stderr, "producer: -pri must be at most 4294967295")
		os.Exit(2)
	}
	cfg.Priority = uint32(pri)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := bsexample.Produce(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
}
