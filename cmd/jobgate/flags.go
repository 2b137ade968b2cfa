package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/jobgate/jobgate/config"
)

// flagSpec is one command-line flag. Every flag sets a config field (its
// path comes from config.FlagFields), so flags and the file cannot disagree:
// a flag the user sets is applied over the file with config.Set.
type flagSpec struct {
	name   string
	usage  string
	isBool bool // given alone (-flag) it means true
}

// flagSpecs are the flags this build serves, in help order. A flag named in
// config.FlagFields but missing here belongs to a feature not wired into the
// command yet; TestFlagSpecsMatchConfig keeps the two lists honest.
var flagSpecs = []flagSpec{
	{"gearman", "Gearman listen `address`; empty disables it", false},
	{"gearman-tls", "Gearman-over-TLS listen `address` (certificates from the config's tls section); empty disables it", false},
	{"gearman-max-packet-size", "largest Gearman packet body accepted (`size`, e.g. 64MiB)", false},
	{"gearman-max-admin-line", "longest Gearman admin text line accepted, newline included (`size`)", false},
	{"gearman-job-retries", "remove a Gearman job after this many failed runs (worker gone, CANT_DO, timeout), like gearmand --job-retries; 0 means no limit", false},
	{"gearman-handle-prefix", "`prefix` of Gearman job handles (prefix:n); empty means H:<hostname>, like gearmand --job-handle-prefix", false},
	{"gearman-exceptions", "forward WORK_EXCEPTION to every client as if each had set the exceptions option (gearmand --exceptions)", true},
	{"gearman-admin-shutdown", "let the Gearman admin commands \"shutdown\" and \"shutdown graceful\" stop jobgate", true},
	{"beanstalk", "Beanstalk listen `address`; empty disables it", false},
	{"beanstalk-tls", "Beanstalk-over-TLS listen `address` (certificates from the config's tls section); empty disables it", false},
	{"beanstalk-max-job-size", "largest Beanstalk job body (`size`), like beanstalkd -z", false},
	{"beanstalk-quote-stats", "quote string values in stats YAML as beanstalkd 1.13 does (1.12 does not)", true},
	{"data", "journal `directory`; empty keeps jobs in memory only (Gearman background jobs are journaled)", false},
	{"data-fsync", "when the journal is flushed to disk: always, interval or never (like beanstalkd -f/-F)", false},
	{"data-fsync-interval", "fsync period of the interval policy (`duration`)", false},
	{"admin", "admin HTTP `address` (/healthz, /readyz, /metrics); empty disables it", false},
	{"admin-max-connections", "most concurrent admin connections, TLS handshakes included; 0: no cap", false},
	{"auth-max-bad-tokens", "close a connection after this many unknown auth tokens", false},
	{"log-level", "log `level`: debug, info, warn or error", false},
	{"log-format", "log `format`: text or json", false},
	{"shutdown-timeout", "how long a drain on SIGTERM/SIGINT waits for the jobs in hand to finish (a `duration`)", false},
	{"io-uring", "make each event loop batch's socket reads, and then its writes, with one io_uring_enter where the kernel allows (-io-uring=false: one system call per read and write)", true},
	{"loop-wait", "how the event loops wait when no socket is ready: auto (in epoll_pwait; parked on the Go netpoller with one CPU) or park (always parked: a shorter latency tail with many busy connections on CPUs of their own; more CPU per request with few; measure it first)", false},
	{"loop-spin", "how long the event loops keep polling before they block when no socket is ready, while their waits bring one event at a time (a `duration`, at most 1ms; 0: block at once; left out, 0 when an upstream is on a loopback address): faster for clients that send one request at a time; costs a gateway throughput when it shares its CPUs with its upstream servers", false},
	{"limits-max-connections", "most client connections, on all listeners together (`n`); 0 means no limit", false},
	{"limits-max-connections-per-ip", "most client connections from one IP address (`n`); 0 means no limit", false},
	{"limits-idle-timeout", "close a connection with nothing pending for this `duration`; 0 means never", false},
	{"limits-read-timeout", "close a connection that takes longer than this `duration` to finish a started request; 0 means no limit", false},
	{"limits-write-timeout", "close a connection whose output makes no progress for this `duration`; 0 means no limit", false},
	{"limits-max-reserved-per-conn", "most jobs one connection may hold reserved or assigned (`n`); 0 means no limit", false},
	{"limits-write-buffer-limit", "`size` of the output queued for a client that stops reading before it is cut off; 0 means no limit", false},
	{"limits-handshake-timeout", "close a TLS connection whose handshake takes longer than this `duration`", false},
	{"limits-max-handshakes", "most TLS handshakes in progress on each TLS listener (`n`); 0 means no limit", false},
	{"tracing-enabled", "export OpenTelemetry traces (also on when OTEL_EXPORTER_OTLP_ENDPOINT is set; never with OTEL_SDK_DISABLED=true)", true},
	{"tracing-endpoint", "OTLP receiver `URL`, e.g. http://jaeger:4318; empty: OTEL_EXPORTER_OTLP_*ENDPOINT, then localhost", false},
	{"tracing-protocol", "OTLP `protocol`: grpc or http/protobuf; empty: OTEL_EXPORTER_OTLP_*PROTOCOL, then http/protobuf", false},
	{"tracing-service-name", "service.name of the spans (`name`); empty: OTEL_SERVICE_NAME, then jobgate", false},
	{"tracing-sampler", "`sampler`: always_on, always_off, traceidratio or parentbased_*; empty: OTEL_TRACES_SAMPLER, then parentbased_always_on", false},
	{"tracing-sample-ratio", "fraction of jobs traced by the ratio samplers, in (0, 1]; 0: OTEL_TRACES_SAMPLER_ARG, then 1", false},
	{"tracing-queue-size", "most finished spans waiting for export (`n`); beyond it spans are dropped; 0: OTEL_BSP_MAX_QUEUE_SIZE, then 2048", false},
	{"tracing-table-size", "most jobs on upstream servers a gateway keeps trace state for (`n`); 0: 65536", false},
	{"tracing-payload-traceparent", "deliver job bodies to workers behind a traceparent line so they can continue the trace", true},
	{"tracing-command-spans", "also make a span for each admin and stats command", true},
	{"tracing-export-off-loop", "send every batch of spans from the export goroutine, never from the event loop that filled it", true},
}

// configFlag holds the text of one flag until it is applied to the config.
type configFlag struct {
	path   string
	value  string
	isBool bool
}

func (f *configFlag) String() string     { return f.value }
func (f *configFlag) Set(s string) error { f.value = s; return nil }
func (f *configFlag) IsBoolFlag() bool   { return f.isBool }

// registerConfigFlags defines every flag of flagSpecs on fs, with its
// default read from config.Default, and returns them by name.
func registerConfigFlags(fs *flag.FlagSet) (map[string]*configFlag, error) {
	paths := config.FlagFields()
	def := config.Default()
	flags := make(map[string]*configFlag, len(flagSpecs))
	for _, spec := range flagSpecs {
		path, ok := paths[spec.name]
		if !ok {
			return nil, fmt.Errorf("flag -%s has no config field", spec.name)
		}
		value, err := def.Get(path)
		if err != nil {
			return nil, fmt.Errorf("flag -%s: %w", spec.name, err)
		}
		f := &configFlag{path: path, value: value, isBool: spec.isBool}
		fs.Var(f, spec.name, spec.usage)
		flags[spec.name] = f
	}
	return flags, nil
}

// applyFlags sets on cfg every flag the user gave, so flags win over the
// file, then validates the result.
func applyFlags(cfg *config.Config, fs *flag.FlagSet, flags map[string]*configFlag) error {
	var errs config.Errors
	fs.Visit(func(fl *flag.Flag) {
		f, ok := flags[fl.Name]
		if !ok {
			return
		}
		if err := cfg.Set(f.path, f.value); err != nil {
			errs = append(errs, err.(*config.FieldError))
		}
	})
	if len(errs) > 0 {
		return errs
	}
	return cfg.Validate()
}

// applyGearmanUpstream is -gearman-upstream, the one-line gateway: every
// Gearman function goes to the gearmand servers listed (comma-separated),
// sharded by name. It does not mix with routing from a config file.
func applyGearmanUpstream(cfg *config.Config, list string) error {
	if len(cfg.Backends) > 0 || len(cfg.Pools) > 0 || len(cfg.Routes.Gearman) > 0 || cfg.Routes.GearmanDefault != config.LocalName {
		return fmt.Errorf("-gearman-upstream: the config file already declares backends, pools or Gearman routes; use one or the other")
	}
	up, err := config.Upstreams(strings.Split(list, ","), nil)
	if err != nil {
		return err
	}
	cfg.Backends = up.Backends
	cfg.Pools = up.Pools
	cfg.Routes.GearmanDefault = up.Routes.GearmanDefault
	return nil
}
