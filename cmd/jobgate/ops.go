package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/logging"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/proxy/admin"
	"github.com/jobgate/jobgate/proxy/connlimit"
)

// operator runs what an operator asks of a running process: reload the
// configuration (SIGHUP, POST /-/reload) and drain (SIGTERM/SIGINT,
// POST /-/drain).
type operator struct {
	args  []string       // the command line, parsed again on reload so flags keep winning
	level *slog.LevelVar // the logger's level, changed by reload
	log   *slog.Logger

	mu       sync.Mutex // serialises reloads; guards the fields below
	cfg      *config.Config
	services []service
}

func newOperator(args []string, cfg *config.Config, level *slog.LevelVar, log *slog.Logger) *operator {
	return &operator{args: args, cfg: cfg, level: level, log: log}
}

// connSharer is a server whose connections count against limits shared
// with other servers.
type connSharer interface {
	ShareConnections(*connlimit.Group)
}

// setServices gives the operator the services to reload and drain, and
// makes their connections count together against limits.max_connections
// and max_connections_per_ip (reloads change the shared caps).
func (o *operator) setServices(s []service) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.services = s
	group := connlimit.NewGroup(o.cfg.Limits.MaxConnections, o.cfg.Limits.MaxConnectionsPerIP)
	for _, svc := range s {
		if cs, ok := svc.server().(connSharer); ok {
			cs.ShareConnections(group)
		}
	}
}

// shutdownTimeout is shutdown_timeout of the configuration in force.
func (o *operator) shutdownTimeout() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cfg.ShutdownTimeout
}

// reloader is a service that applies the live part of a new configuration.
// reload checks cfg and returns the function that puts it in force, or an
// error that refuses the whole reload: nothing is applied unless every
// service accepts. The auth policy and Beanstalk routes plug in here.
type reloader interface {
	prepareReload(cfg *config.Config) (apply func(), err error)
}

// liveFields are the config paths (and sections, by prefix) a reload
// applies; a change to any other field is logged as needing a restart.
// Lists (backends, routes) are compared by the services themselves.
var liveFields = []string{"log.level", "limits", "auth", "shutdown_timeout", "routes.gearman", "backends",
	"routes.beanstalk", "routes.beanstalk_default"}

// reload reads the configuration again (file and command line) and puts it
// in force, or leaves the old one running and returns every error.
func (o *operator) reload(context.Context) error {
	var msg strings.Builder
	cfg, _ := parseCommandLine(o.args, &msg)
	if cfg == nil {
		return errors.New(strings.TrimSpace(strings.ReplaceAll(msg.String(), "jobgate: ", "")))
	}
	level, err := logging.ParseLevel(cfg.Log.Level)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var applies []func()
	var errs []error
	for _, s := range o.services {
		if r, ok := s.server().(reloader); ok {
			apply, err := r.prepareReload(cfg)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			applies = append(applies, apply)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if changed := restartFields(o.cfg, cfg); len(changed) > 0 {
		o.log.Warn("reload: these fields changed but take effect only after a restart", "fields", strings.Join(changed, ", "))
	}
	o.level.Set(level)
	for _, apply := range applies {
		apply()
	}
	o.cfg = cfg
	return nil
}

// restartFields lists the fields that differ between old and new and that
// a reload does not apply.
func restartFields(old, new *config.Config) []string {
	var out []string
	for _, path := range config.Fields() {
		if strings.Contains(path, "[]") || isLive(path) {
			continue
		}
		a, errA := old.Get(path)
		b, errB := new.Get(path)
		if errA == nil && errB == nil && a != b {
			out = append(out, path)
		}
	}
	return out
}

func isLive(path string) bool {
	for _, p := range liveFields {
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return true
		}
	}
	return false
}

// drainer is a service that can stop taking new work while the work in
// hand finishes (proxy servers' Drain and Idle).
type drainer interface {
	Drain()
	Idle() bool
}

// drainStart stops every service from taking new work. It returns at
// once; POST /-/drain calls it too.
func (o *operator) drainStart(context.Context) error {
	o.mu.Lock()
	services := o.services
	o.mu.Unlock()
	for _, s := range services {
		if d, ok := s.server().(drainer); ok {
			d.Drain()
		}
	}
	return nil
}

// drainPoll is how often a drain checks whether the work in hand is done.
const drainPoll = 20 * time.Millisecond

// drain stops new work and waits until every service is idle or ctx ends;
// it reports whether they all went idle.
func (o *operator) drain(ctx context.Context) bool {
	o.drainStart(ctx)
	o.mu.Lock()
	services := o.services
	o.mu.Unlock()
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for {
		idle := true
		for _, s := range services {
			if d, ok := s.server().(drainer); ok && !d.Idle() {
				idle = false
			}
		}
		if idle {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// limitsFrom turns the limits section into the servers' own.
func limitsFrom(l config.Limits) proxy.Limits {
	buf := l.WriteBufferLimit.Int()
	if buf == 0 {
		buf = math.MaxInt // the config's 0 is "no limit", proxy's "its default"
	}
	return proxy.Limits{
		MaxConns:           l.MaxConnections,
		MaxConnsPerIP:      l.MaxConnectionsPerIP,
		IdleTimeout:        l.IdleTimeout,
		ReadTimeout:        l.ReadTimeout,
		WriteTimeout:       l.WriteTimeout,
		MaxReservedPerConn: l.MaxReservedPerConn,
		WriteBufferLimit:   buf,
		HandshakeTimeout:   l.HandshakeTimeout,
		MaxHandshakes:      l.MaxHandshakes,
	}
}

// readyCheck is one /readyz check of a service.
type readyCheck struct {
	name string
	f    admin.CheckFunc
}

// readiness is a service with /readyz checks of its own.
type readiness interface {
	readyChecks() []readyCheck
}

// addReadyChecks adds the checks of every service that has some.
func addReadyChecks(adm *admin.Server, services []service) {
	for _, s := range services {
		if r, ok := s.server().(readiness); ok {
			for _, c := range r.readyChecks() {
				adm.AddCheck(c.name, c.f)
			}
		}
	}
}

// journalCheck is ready once the journal is open, which is after its
// replay (a service is built only then), and while it accepts writes: a
// journal that failed (disk full, I/O error) refuses every change.
func journalCheck(j *journal.Journal) admin.CheckFunc {
	return func(context.Context) error {
		if err := j.Stats().Err; err != nil {
			return fmt.Errorf("journal failed: %w", err)
		}
		return nil
	}
}

// fsyncHook feeds the journal's fsync latencies of protocol p to m; nil
// without metrics.
func fsyncHook(m *metrics.Metrics, p metrics.Protocol) func(time.Duration) {
	if m == nil {
		return nil
	}
	return func(d time.Duration) { m.ObserveFsync(p, d) }
}
