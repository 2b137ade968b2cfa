package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jobgate/jobgate/config"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/proxy"
)

// newBeanstalkServer builds the Beanstalk server on a new in-process
// engine. SIGUSR1 puts the engine in drain mode, as it does beanstalkd.
func newBeanstalkServer(cfg *config.Config, log *slog.Logger) (protocolServer, error) {
	log = log.With("service", "beanstalk")
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{
		EngineConfig: engine.Config{
			MaxJobSize:   cfg.Beanstalk.MaxJobSize.Int(),
			Version:      version,
			QuoteStrings: cfg.Beanstalk.QuoteStats,
		},
		Log: log,
	})
	if err != nil {
		return nil, err
	}
	eng := srv.Engine()
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			if !eng.Draining() {
				log.Info("entering drain mode (SIGUSR1): put answers DRAINING")
			}
			eng.SetDraining(true)
		}
	}()
	return srv, nil
}
