// Command worker is an example Gearman worker written on jobgate's codec: it
// registers a function (default "reverse"), sleeps until the server has a job
// for it, and answers each job with its payload reversed, reporting progress
// (WORK_STATUS) and a streamed chunk (WORK_DATA) before the result
// (WORK_COMPLETE). The protocol code is in package gmexample.
//
//	go run ./examples/gearman/worker -addr 127.0.0.1:4730
//	gearman -h 127.0.0.1 -p 4730 -f reverse "hello"   # prints olleh
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

	"github.com/jobgate/jobgate/examples/gearman/gmexample"
)

func main() {
	var cfg gmexample.WorkerConfig
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:4730", "Gearman server `host:port`")
	flag.StringVar(&cfg.Function, "f", "reverse", "`function` name to register (CAN_DO)")
	flag.StringVar(&cfg.ClientID, "id", "", "worker `ID` shown by gearadmin --workers (SET_CLIENT_ID)")
	flag.IntVar(&cfg.Jobs, "n", 0, "exit after this many jobs; 0 runs until interrupted")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := gmexample.RunWorker(ctx, cfg, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
