package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/tracing"
)

// gearmanService is the Gearman server plus the journal it owns, closed
// after the server has stopped.
type gearmanService struct {
	*proxy.GearmanServer
	journal *gearman.FileJournal // nil without persistence
	metrics *metrics.Metrics     // for the backends a reload builds
}

// Shutdown stops the server, then closes the journal.
func (s *gearmanService) Shutdown(ctx context.Context) error {
	err := s.GearmanServer.Shutdown(ctx)
	if s.journal != nil {
		err = errors.Join(err, s.journal.Close())
	}
	return err
}

// newGearmanServer builds the Gearman server on a new in-process engine,
// restoring its background jobs from the journal under data.dir; with
// gearman backends configured it routes functions to them as a gateway.
func newGearmanServer(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, tr *tracing.Tracer) (protocolServer, error) {
	g := cfg.Gearman
	log = log.With("service", "gearman")
	sc := proxy.GearmanConfig{
		Engine: gearman.Config{
			HandlePrefix: g.HandlePrefix,
			JobRetries:   g.JobRetries,
			Exceptions:   g.Exceptions,
			Version:      version,
		},
		Limits: codec.Limits{
			MaxPacketSize: g.MaxPacketSize.Int(),
			MaxLineSize:   g.MaxAdminLine.Int(),
		},
		Log:        log,
		Metrics:    m,
		ConnLimits: limitsFrom(cfg.Limits),
		Tracer:     tr,
		// tracing.table_size (0: the default) bounds a gateway's trace state.
		TraceTableSize: cfg.Tracing.TableSize,
	}
	pol, err := authPolicy(cfg)
	if err != nil {
		return nil, err
	}
	sc.Auth, sc.MaxBadTokens = pol, cfg.Auth.MaxBadTokens
	if g.AdminShutdown {
		sc.OnShutdown = func(graceful bool) {
			// main stops every service on SIGTERM; the admin command takes
			// the same path.
			log.Info("admin shutdown", "graceful", graceful)
			stopSelf()
		}
	}
	var fj *gearman.FileJournal
	if cfg.Data.Dir != "" {
		var rep journal.ReplayReport
		var err error
		fj, rep, err = gearman.OpenJournal(cfg.Data.Dir, journal.Options{Sync: syncPolicy(cfg.Data), Logger: log, OnSync: fsyncHook(m, metrics.Gearman)})
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		log.Info("journal replayed", "dir", fj.Journal().Dir(), "segments", rep.Segments, "records", rep.Records, "damaged", len(rep.Damage))
		sc.Engine.Journal = fj
	}
	gw, err := proxy.NewGearmanGatewayFromConfig(cfg, m)
	if err != nil {
		if fj != nil {
			fj.Close()
		}
		return nil, fmt.Errorf("routing: %w", err)
	}
	sc.Gateway = gw
	srv, err := proxy.NewGearmanServer(sc)
	if err != nil {
		if fj != nil {
			fj.Close()
		}
		return nil, err
	}
	if fj != nil {
		log.Info("jobs restored", "jobs", fj.Restored())
		if m != nil {
			m.SetJournal(metrics.Gearman, fj.Journal())
		}
	}
	registerEvictedMetric(m, tr, srv.TraceEvicted)
	return &gearmanService{GearmanServer: srv, journal: fj, metrics: m}, nil
}

// syncPolicy turns data.fsync into the journal's policy.
func syncPolicy(d config.Data) journal.SyncPolicy {
	switch d.Fsync {
	case config.FsyncAlways:
		return journal.Always
	case config.FsyncNever:
		return journal.Never
	}
	return journal.Interval(d.FsyncInterval)
}

// readyChecks are the service's /readyz checks.
func (s *gearmanService) readyChecks() []readyCheck {
	var j *journal.Journal
	if s.journal != nil {
		j = s.journal.Journal()
	}
	return serverReadyChecks("gearman", s.RoutesReady, j)
}

// prepareReload takes the new limits, auth policy and Gearman routing
// (reloader).
func (s *gearmanService) prepareReload(cfg *config.Config) (func(), error) {
	return prepareServerReload(s, cfg, s.metrics)
}
