// Command jobgate serves the Gearman and Beanstalk protocols from in-process
// job engines. This file only wires: parse flags and config, construct the
// servers, run them, wait for a signal, shut down.
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
	"runtime/debug"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/logging"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy/admin"
	"github.com/jobgate/jobgate/proxy/tlsconf"
	"github.com/jobgate/jobgate/tracing"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// protocolServer is what main needs of a server: serve a listener until
// shut down.
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
  jobgate [-config FILE] [flags]   run the servers; flags win over the file
  jobgate -gearman-upstream ADDR,...  a Gearman gateway in front of gearmand servers
  jobgate -beanstalk-upstream ADDR,...  a Beanstalk gateway in front of beanstalkd servers
  jobgate check-config FILE        validate a configuration file and exit
  jobgate version                  print the version and exit

Signals: SIGTERM or SIGINT drains (no new jobs, jobs in hand finish) and
exits, a second one exits at once; SIGHUP reloads the configuration.

Flags:
`

// run is main without the process exit, so tests can drive it.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "version":
			fmt.Fprintf(stdout, "jobgate %s\n", version)
			return 0
		case "check-config":
			return checkConfig(args[1:], stdout, stderr)
		}
	}
	cfg, code := parseCommandLine(args, stderr)
	if cfg == nil {
		return code
	}
	log, level, err := logging.New(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		fmt.Fprintf(stderr, "jobgate: %v\n", err)
		return 2
	}
	tm, err := newTLS(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "jobgate: %v\n", err)
		return 1
	}
	if tm != nil {
		defer tm.Close() // after the servers: established connections keep going until then
	}
	tp, err := startTracing(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "jobgate: %v\n", err)
		return 1
	}
	defer stopTracing(tp, cfg.ShutdownTimeout, log) // after the servers stopped
	op := newOperator(args, cfg, level, log)
	applyLoopWait(cfg)
	services, listenersBound, err := buildServices(cfg, log, tm, tp, op)
	if err != nil {
		fmt.Fprintf(stderr, "jobgate: %v\n", err)
		return 1
	}
	if len(services) == 0 {
		fmt.Fprintln(stderr, "jobgate: every listener is disabled; nothing to do")
		return 2
	}
	// Journal replay builds and drops a copy of every record; hand that
	// memory back now rather than carry it until the heap grows into it.
	debug.FreeOSMemory()
	op.setServices(services)
	return serve(services, listenersBound, op, log, tlsStarter(tm, cfg, log))
}

// parseCommandLine reads the flags and the config file into one validated
// config. On failure it returns nil and the exit code, having said why.
func parseCommandLine(args []string, stderr io.Writer) (*config.Config, int) {
	fs := flag.NewFlagSet("jobgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "YAML configuration `file` (every field is in the README); flags win over it")
	gearmanUpstream := fs.String("gearman-upstream", "", "route every Gearman function to these gearmand `addresses` (comma-separated), sharded by name")
	beanstalkUpstream := fs.String("beanstalk-upstream", "", "route every Beanstalk tube to these beanstalkd `addresses` (comma-separated), sharded by name")
	flags, err := registerConfigFlags(fs)
	if err != nil {
		fmt.Fprintf(stderr, "jobgate: %v\n", err)
		return nil, 1
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "jobgate: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return nil, 2
	}
	cfg := config.Default()
	if *configPath != "" {
		if cfg, err = config.Load(*configPath); err != nil {
			fmt.Fprintf(stderr, "jobgate: %v\n", err)
			return nil, 2
		}
	}
	if *gearmanUpstream != "" {
		if err := applyGearmanUpstream(cfg, *gearmanUpstream); err != nil {
			fmt.Fprintf(stderr, "jobgate: %v\n", err)
			return nil, 2
		}
	}
	if *beanstalkUpstream != "" {
		if err := applyBeanstalkUpstream(cfg, *beanstalkUpstream); err != nil {
			fmt.Fprintf(stderr, "jobgate: %v\n", err)
			return nil, 2
		}
	}
	if err := applyFlags(cfg, fs, flags); err != nil {
		fmt.Fprintf(stderr, "jobgate: %v\n", err)
		return nil, 2
	}
	return cfg, 0
}

// checkConfig is "jobgate check-config FILE": every error at once, warnings
// too, and exit status 0 only for a file jobgate would run with.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: jobgate check-config FILE")
		return 2
	}
	cfg, err := config.Load(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stderr, "warning: %v\n", w)
	}
	fmt.Fprintf(stdout, "%s: ok\n", args[0])
	return 0
}

// buildServices constructs a server for every enabled listener. The
// returned flag turns ready once every listener is bound. Metrics are
// collected only when the admin server is there to serve them.
func buildServices(cfg *config.Config, log *slog.Logger, tm *tlsconf.Manager, tp *tracing.Provider, op *operator) ([]service, *admin.Flag, error) {
	var m *metrics.Metrics
	if cfg.Admin.Listen != "" {
		m = metrics.New(metrics.Options{Version: version, Logger: log})
		registerTracingMetrics(m, tp)
	}
	var services []service
	if cfg.Gearman.Listen != "" || cfg.Gearman.TLSListen != "" {
		srv, err := newGearmanServer(cfg, log, m, tracerFor(tp, tracing.Gearman))
		if err != nil {
			return nil, nil, fmt.Errorf("gearman: %w", err)
		}
		services = append(services, protocolServices("gearman", cfg.Gearman.Listen, cfg.Gearman.TLSListen, srv, tm, log)...)
	}
	if cfg.Beanstalk.Listen != "" || cfg.Beanstalk.TLSListen != "" {
		srv, err := newBeanstalkServer(cfg, log, m, tracerFor(tp, tracing.Beanstalk))
		if err != nil {
			return nil, nil, fmt.Errorf("beanstalk: %w", err)
		}
		services = append(services, protocolServices("beanstalk", cfg.Beanstalk.Listen, cfg.Beanstalk.TLSListen, srv, tm, log)...)
	}
	bound := admin.NewFlag("listeners bound")
	if m != nil && len(services) > 0 {
		atls, err := adminTLS(cfg, tm)
		if err != nil {
			return nil, nil, err
		}
		adm := admin.New(admin.Options{Metrics: m.Handler(), Logger: log, TLSConfig: atls, Reload: op.reload, Drain: op.drainStart,
			MaxConnections: cfg.Admin.MaxConnections})
		adm.AddCheck("listeners", bound.Check)
		addReadyChecks(adm, services)
		services = append(services, service{"admin", cfg.Admin.Listen, adm})
	}
	return services, bound, nil
}

// serve binds every listener first (so a port conflict fails the start
// before anything serves), runs them, reloads the configuration on SIGHUP,
// and on SIGINT/SIGTERM drains (ops.go) and shuts them down; when one fails
// it shuts down at once. A second signal exits at once. afterBind, when
// set, runs once every listener is bound, before they serve.
func serve(services []service, bound *admin.Flag, op *operator, log *slog.Logger, afterBind func() error) int {
	// Catch the signals before the listeners are announced: a SIGHUP or
	// SIGTERM sent as soon as they are must not find the default action
	// (exit) still in place.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	listeners := make([]net.Listener, len(services))
	for i, s := range services {
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			log.Error("listen", "service", s.name, "addr", s.addr, "err", err)
			for _, l := range listeners[:i] {
				l.Close()
			}
			return 1
		}
		listeners[i] = l
		log.Info("listening", "service", s.name, "addr", l.Addr().String())
	}
	if afterBind != nil {
		if err := afterBind(); err != nil {
			log.Error("start", "err", err)
			for _, l := range listeners {
				l.Close()
			}
			return 1
		}
	}
	bound.Set(true)

	failed := make(chan error, len(services))
	for i, s := range services {
		go func() {
			if err := s.srv.Serve(listeners[i]); err != nil {
				failed <- fmt.Errorf("%s: %w", s.name, err)
			}
		}()
	}

	code := 0
	drain := false
wait:
	for {
		select {
		case <-hup:
			if err := op.reload(context.Background()); err != nil {
				log.Error("reload refused; the running configuration stays", "err", err)
			} else {
				log.Info("configuration reloaded")
			}
		case sig := <-signals:
			log.Info("draining", "signal", sig.String())
			drain = true
			break wait
		case sig := <-selfStop:
			log.Info("draining", "signal", sig.String())
			drain = true
			break wait
		case err := <-failed:
			log.Error("server failed", "err", err)
			code = 1
			break wait
		}
	}
	go func() {
		if sig, ok := <-signals; ok {
			log.Warn("second signal: exiting now", "signal", sig.String())
			os.Exit(1)
		}
	}()
	if drain {
		dctx, dcancel := context.WithTimeout(context.Background(), op.shutdownTimeout())
		if !op.drain(dctx) {
			log.Warn("drain timed out: closing connections with jobs in hand (they go back to ready)")
		}
		dcancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	for _, s := range services {
		if err := s.srv.Shutdown(ctx); err != nil {
			log.Error("shutdown", "service", s.name, "err", err)
			code = 1
		}
	}
	return code
}

// closeTimeout bounds closing the servers once the drain is over.
const closeTimeout = 5 * time.Second

// selfStop carries a shutdown the process asks of itself where it cannot
// send itself a signal (stopSelf, signals_other.go).
var selfStop = make(chan os.Signal, 1)
