package main

import (
	"flag"
	"log/slog"
	"os"
	"syscall"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy"
)

// gearmanFlags holds the Gearman server's flags.
type gearmanFlags struct {
	jobRetries    int
	handlePrefix  string
	maxPacketSize int
	exceptions    bool
	adminShutdown bool
}

func (f *gearmanFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.jobRetries, "gearman-job-retries", 0,
		"remove a Gearman job after this many failed runs (worker gone, CANT_DO, timeout), like gearmand --job-retries; 0 means no limit")
	fs.StringVar(&f.handlePrefix, "gearman-handle-prefix", "",
		"`prefix` of Gearman job handles (prefix:n); default H:<hostname>, like gearmand --job-handle-prefix")
	fs.IntVar(&f.maxPacketSize, "gearman-max-packet-size", codec.DefaultMaxPacketSize,
		"largest Gearman packet body accepted, in `bytes`")
	fs.BoolVar(&f.exceptions, "gearman-exceptions", false,
		"forward WORK_EXCEPTION to every client, as if each had set the exceptions option (gearmand --exceptions)")
	fs.BoolVar(&f.adminShutdown, "gearman-admin-shutdown", false,
		"let the Gearman admin commands \"shutdown\" and \"shutdown graceful\" stop jobgate")
}

func (f *gearmanFlags) newServer(log *slog.Logger) (protocolServer, error) {
	cfg := proxy.GearmanConfig{
		Engine: gearman.Config{
			HandlePrefix: f.handlePrefix,
			JobRetries:   f.jobRetries,
			Exceptions:   f.exceptions,
			Version:      version,
		},
		Limits: codec.Limits{MaxPacketSize: f.maxPacketSize},
		Log:    log.With("service", "gearman"),
	}
	if f.adminShutdown {
		cfg.OnShutdown = func(graceful bool) {
			// main stops every service on SIGTERM; the admin command takes
			// the same path.
			log.Info("gearman admin shutdown", "graceful", graceful)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		}
	}
	return proxy.NewGearmanServer(cfg)
}
