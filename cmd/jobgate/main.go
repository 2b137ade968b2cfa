// Command jobgate serves the Gearman and Beanstalk protocols from in-process
// job engines. This file only wires: parse flags, construct the servers, run
// them, wait for a signal, shut down.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// protocolServer is what main needs of a protocol server: serve a listener
// until shut down.
type protocolServer interface {
	// Serve accepts connections on l until Shutdown; it returns nil after a
	// Shutdown and the accept error otherwise.
	Serve(l net.Listener) error
	// Shutdown stops accepting, closes connections and returns when they are
	// gone or ctx ends.
	Shutdown(ctx context.Context) error
}

// service is one configured listener: its name, address and server.
type service struct {
	name string
	addr string
	srv  protocolServer
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usageHead = `jobgate serves Gearman and Beanstalk from in-process job engines.

Usage:
  jobgate [flags]       run the servers
  jobgate version       print the version and exit

Flags:
`

// run is main without the process exit, so tests can drive it.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "version" {
		fmt.Fprintf(stdout, "jobgate %s\n", version)
		return 0
	}
	fs := flag.NewFlagSet("jobgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.PrintDefaults()
	}
	gearmanAddr := fs.String("gearman", ":4730", "Gearman listen `address`; empty disables it")
	beanstalkAddr := fs.String("beanstalk", ":11300", "Beanstalk listen `address`; empty disables it")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "how long a graceful shutdown waits for connections to finish")
	var gf gearmanFlags
	gf.register(fs)
	var bf beanstalkFlags
	bf.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "jobgate: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	var services []service
	if *gearmanAddr != "" {
		srv, err := gf.newServer(log)
		if err != nil {
			fmt.Fprintf(stderr, "jobgate: gearman: %v\n", err)
			return 1
		}
		services = append(services, service{"gearman", *gearmanAddr, srv})
	}
	if *beanstalkAddr != "" {
		srv, err := bf.newServer(log)
		if err != nil {
			fmt.Fprintf(stderr, "jobgate: beanstalk: %v\n", err)
			return 1
		}
		services = append(services, service{"beanstalk", *beanstalkAddr, srv})
	}
	if len(services) == 0 {
		fmt.Fprintln(stderr, "jobgate: every listener is disabled; nothing to do")
		return 2
	}
	return serve(services, *shutdownTimeout, log)
}

// serve binds every listener first (so a port conflict fails the start
// before anything serves), runs them, and shuts them down on SIGINT/SIGTERM
// or when one fails. A second signal exits at once.
func serve(services []service, shutdownTimeout time.Duration, log *slog.Logger) int {
	listeners := make([]net.Listener, len(services))
	for i, s := range services {
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			log.Error("listen", "service", s.name, "addr", s.addr, "err", err)
			for _, bound := range listeners[:i] {
				bound.Close()
			}
			return 1
		}
		listeners[i] = l
		log.Info("listening", "service", s.name, "addr", l.Addr().String())
	}

	failed := make(chan error, len(services))
	for i, s := range services {
		go func() {
			if err := s.srv.Serve(listeners[i]); err != nil {
				failed <- fmt.Errorf("%s: %w", s.name, err)
			}
		}()
	}

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	code := 0
	select {
	case sig := <-signals:
		log.Info("shutting down", "signal", sig.String())
	case err := <-failed:
		log.Error("server failed", "err", err)
		code = 1
	}
	go func() {
		sig := <-signals
		log.Warn("second signal: exiting now", "signal", sig.String())
		os.Exit(1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, s := range services {
		if err := s.srv.Shutdown(ctx); err != nil {
			log.Error("shutdown", "service", s.name, "err", err)
			code = 1
		}
	}
	return code
}
