package metrics

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Protocol is the protocol label of a series.
type Protocol uint8

// The protocols.
const (
	Gearman Protocol = iota
	Beanstalk
	numProtocols
)

var protocolNames = [numProtocols]string{Gearman: "gearman", Beanstalk: "beanstalk"}

// String returns the label value: "gearman" or "beanstalk".
func (p Protocol) String() string {
	if p < numProtocols {
		return protocolNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", uint8(p))
}

// index folds an out-of-range Protocol into Gearman: callers pass the
// constants, and a bad value should miscount rather than panic on a
// connection's hot path.
func (p Protocol) index() int {
	if p < numProtocols {
		return int(p)
	}
	return 0
}

// DefaultMaxNames is the default cap on name labels per protocol.
const DefaultMaxNames = 1000

// Options configures New. The zero value is valid.
type Options struct {
	// MaxNames caps the distinct function/tube names with their own label,
	// per protocol; later names share "_overflow". 0 means
	// DefaultMaxNames; it is clamped to MaxNamesLimit. A negative value
	// sends every name to "_overflow".
	MaxNames int
	// Version is the build_info version label. Default "unknown".
	Version string
	// NoRuntimeCollectors leaves out the go_* and process_* collectors;
	// tests use it to get a small, exact exposition.
	NoRuntimeCollectors bool
	// Logger receives errors from scrapes. Default slog.Default().
	Logger *slog.Logger
}

// Buckets of the histograms, in seconds. Queue wait spans milliseconds
// (a worker waiting) to hours (a backlog or a delayed job); run time and
// upstream latency are tighter.
var (
	QueueWaitBuckets = []float64{.001, .005, .025, .1, .5, 2.5, 10, 60, 300, 1800}
	RunBuckets       = []float64{.001, .005, .025, .1, .5, 2.5, 10, 60, 300}
	LatencyBuckets   = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	FsyncBuckets     = []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}
)

// Metrics is jobgate's metric set. Its methods are safe for concurrent use.
// Handles returned by it (JobSeries, BackendSeries, ConnSeries) stay valid
// for the life of the Metrics and are meant to be resolved once and kept:
// by a session per name it touches, by the wiring per backend and
// listener.
type Metrics struct {
	reg    *prometheus.Registry
	logger *slog.Logger

	// Commands counts client commands by protocol, command and result.
	Commands Commands

	jobs       jobVecs
	names      [numProtocols]*Limiter[*JobSeries]
	conns      [numProtocols]*ConnSeries
	backendVec backendVecs
	fsync      [numProtocols]prometheus.Observer

	mu       sync.Mutex
	backends map[string]*BackendSeries
	queues   *queueCollector
	scrape   *scrapeCollector
}

// New builds the metric set and its registry.
func New(opts Options) *Metrics {
	if opts.Version == "" {
		opts.Version = "unknown"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	maxNames := opts.MaxNames
	if maxNames == 0 {
		maxNames = DefaultMaxNames
	}
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg, logger: opts.Logger, backends: make(map[string]*BackendSeries)}
	if !opts.NoRuntimeCollectors {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "jobgate_build_info",
		Help:        "Always 1; the version label says which jobgate is running.",
		ConstLabels: prometheus.Labels{"version": opts.Version},
	}, func() float64 { return 1 }))

	m.Commands.init(reg)
	m.jobs.init(reg)
	m.backendVec.init(reg)
	for p := range numProtocols {
		m.names[p] = NewLimiter(maxNames, func(label string) *JobSeries { return m.jobs.series(p, label) })
		lim := m.names[p]
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "jobgate_names_tracked",
			Help:        "Distinct function/tube names with their own name label; at jobgate_names_limit, new names are counted as _overflow.",
			ConstLabels: prometheus.Labels{"protocol": p.String()},
		}, func() float64 { return float64(lim.Len()) }))
	}
	limit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "jobgate_names_limit",
		Help: "The cap on distinct name labels per protocol.",
	})
	limit.Set(float64(m.names[0].Max()))
	reg.MustRegister(limit)
	m.conns = newConnSeries(reg)
	newTLSFailures(reg, m.conns)
	fsync := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jobgate_journal_fsync_seconds",
		Help:    "Time taken by each fsync of the protocol engine's journal.",
		Buckets: FsyncBuckets,
	}, []string{"protocol"})
	reg.MustRegister(fsync)
	for p := range numProtocols {
		m.fsync[p] = fsync.WithLabelValues(p.String())
	}
	m.queues = &queueCollector{m: m}
	reg.MustRegister(m.queues)
	m.scrape = &scrapeCollector{}
	reg.MustRegister(m.scrape)
	return m
}

// Registry returns the registry, for tests and for registering extra
// collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler returns the /metrics handler. Scrape errors are logged and the
// good part of the exposition is still served; at most 4 scrapes run at
// once, so a misconfigured scraper cannot pile up scrape-time collection.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            slogPrintln{m.logger},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// slogPrintln adapts a slog.Logger to promhttp's Logger interface.
type slogPrintln struct{ l *slog.Logger }

func (s slogPrintln) Println(v ...any) { s.l.Warn("metrics scrape", "error", fmt.Sprint(v...)) }

// Job returns the series of the function (Gearman) or tube (Beanstalk)
// name, admitting it under the name cap. A session should keep the result
// rather than look it up per job, though the lookup is cheap.
func (m *Metrics) Job(p Protocol, name string) *JobSeries {
	return m.names[p.index()].Get(name)
}

// JobBytes is Job for a name in a byte slice (a codec value); it does not
// allocate for a known name.
func (m *Metrics) JobBytes(p Protocol, name []byte) *JobSeries {
	return m.names[p.index()].GetBytes(name)
}

// NameLabel returns the name label a function/tube gets: itself, or
// "_overflow". It admits the name if there is room.
func (m *Metrics) NameLabel(p Protocol, name string) string {
	return m.names[p.index()].Label(name)
}

// Conns returns the connection series of protocol p.
func (m *Metrics) Conns(p Protocol) *ConnSeries { return m.conns[p.index()] }

// ObserveFsync records one fsync of protocol p's journal. It is meant for
// the journal's per-fsync hook (journal.Options.OnSync);
// jobserver/journal.Stats only keeps the latest latency, which the
// scrape-time collector exports as jobgate_journal_last_fsync_seconds.
func (m *Metrics) ObserveFsync(p Protocol, d time.Duration) {
	m.fsync[p.index()].Observe(d.Seconds())
}
