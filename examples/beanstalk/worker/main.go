// Command worker is an example Beanstalk worker using the go-beanstalk
// client: it watches a tube, reserves jobs, uppercases and prints each body,
// and deletes the job. A job whose processing fails (with -fail, bodies
// containing that string do) is released with a delay to be retried, and
// buried once it has failed -attempts times, as counted by the server's
// stats-job. The code is in package bsexample.
//
//	go run ./examples/beanstalk/worker -tube demo
//	go run ./examples/beanstalk/worker -tube demo -fail bad -attempts 3 -retry-delay 1s
//
// Interrupt it (Ctrl-C) to stop it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/examples/beanstalk/bsexample"
)

func main() {
	var cfg bsexample.WorkerConfig
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:11300", "Beanstalk server `host:port`")
	flag.StringVar(&cfg.Tube, "tube", "default", "`tube` to watch")
	flag.IntVar(&cfg.Jobs, "n", 0, "exit after finishing (deleting or burying) this many jobs; 0 runs until interrupted")
	flag.IntVar(&cfg.MaxAttempts, "attempts", 3, "bury a job once it has failed this many times")
	flag.DurationVar(&cfg.RetryDelay, "retry-delay", time.Second, "delay before a released job is ready again (whole seconds)")
	flag.StringVar(&cfg.FailOn, "fail", "", "fail jobs whose body contains this `string`, to see releases and burying")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bsexample.Work(ctx, cfg, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
