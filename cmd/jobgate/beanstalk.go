package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"

	"github.com/jobgate/jobgate/config"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/tracing"
)

// beanstalkService is the Beanstalk server plus the journal it owns, closed
// after the server has stopped.
type beanstalkService struct {
	*proxy.BeanstalkServer
	journal *engine.FileJournal // nil without persistence
	usr1    chan os.Signal
	metrics *metrics.Metrics // for the backends a reload builds
}

// Shutdown stops the server, then closes the journal.
func (s *beanstalkService) Shutdown(ctx context.Context) error {
	signal.Stop(s.usr1)
	err := s.BeanstalkServer.Shutdown(ctx)
	if s.journal != nil {
		err = errors.Join(err, s.journal.Close())
	}
	return err
}

// readyChecks are the service's /readyz checks.
func (s *beanstalkService) readyChecks() []readyCheck {
	var j *journal.Journal
	if s.journal != nil {
		j = s.journal.Journal()
	}
	return serverReadyChecks("beanstalk", s.RoutesReady, j)
}

// prepareReload takes the new limits, auth policy and Beanstalk routing
// (reloader).
func (s *beanstalkService) prepareReload(cfg *config.Config) (func(), error) {
	return prepareServerReload(s, cfg, s.metrics)
}

// newBeanstalkServer builds the Beanstalk server on a new in-process engine,
// restoring its jobs from the journal under data.dir. SIGUSR1 puts the
// engine in drain mode, as it does beanstalkd.
func newBeanstalkServer(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, tr *tracing.Tracer) (protocolServer, error) {
	log = log.With("service", "beanstalk")
	ec := engine.Config{
		MaxJobSize:   cfg.Beanstalk.MaxJobSize.Int(),
		Version:      version,
		QuoteStrings: cfg.Beanstalk.QuoteStats,
	}
	pol, err := authPolicy(cfg)
	if err != nil {
		return nil, err
	}
	var fj *engine.FileJournal
	if cfg.Data.Dir != "" {
		var rep journal.ReplayReport
		var err error
		fj, rep, err = engine.OpenJournal(cfg.Data.Dir, journal.Options{Sync: syncPolicy(cfg.Data), Logger: log, OnSync: fsyncHook(m, metrics.Beanstalk)})
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		log.Info("journal replayed", "dir", fj.Journal().Dir(), "segments", rep.Segments, "records", rep.Records, "damaged", len(rep.Damage))
		ec.Journal = fj
	}
	gw, err := proxy.NewBeanstalkGatewayFromConfig(cfg, m)
	if err != nil {
		if fj != nil {
			fj.Close()
		}
		return nil, fmt.Errorf("routing: %w", err)
	}
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{EngineConfig: ec, Log: log, Metrics: m, Auth: pol, MaxBadTokens: cfg.Auth.MaxBadTokens, ConnLimits: limitsFrom(cfg.Limits), Tracer: tr, TraceTableSize: cfg.Tracing.TableSize, Gateway: gw})
	if err != nil {
		if fj != nil {
			fj.Close()
		}
		return nil, err
	}
	if fj != nil {
		log.Info("jobs restored", "jobs", fj.Restored())
		if m != nil {
			m.SetJournal(metrics.Beanstalk, fj.Journal())
		}
	}
	registerEvictedMetric(m, tr, srv.TraceEvicted)
	s := &beanstalkService{BeanstalkServer: srv, journal: fj, usr1: make(chan os.Signal, 1), metrics: m}
	if drainSignal != nil {
		signal.Notify(s.usr1, drainSignal)
	}
	go func() {
		for range s.usr1 {
			if !srv.Draining() {
				log.Info("entering drain mode (SIGUSR1): put answers DRAINING")
			}
			srv.SetDraining(true) // the gateway's puts too
		}
	}()
	return s, nil
}
