package metrics

import (
	"sync"

	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/prometheus/client_golang/prometheus"
)

// JournalStatser is what the journal series are read from at scrape time;
// *journal.Journal implements it.
type JournalStatser interface {
	Stats() journal.Stats
}

// SpanCounter is what the tracing series are read from at scrape time;
// *tracing.Provider implements it. (An interface rather than the type, so
// this package does not pull in OpenTelemetry.)
type SpanCounter interface {
	// Dropped is how many finished spans the export queue discarded.
	Dropped() uint64
	// ExportFailed is how many spans were lost to failed exports.
	ExportFailed() uint64
}

// SetJournal makes each scrape read j.Stats() for protocol p's journal
// series (each engine has its own journal); nil removes them (persistence
// off).
func (m *Metrics) SetJournal(p Protocol, j JournalStatser) {
	m.scrape.mu.Lock()
	defer m.scrape.mu.Unlock()
	m.scrape.journals[p.index()] = j
}

// SetTracer makes each scrape read t for the tracing series; nil removes
// them (tracing off).
func (m *Metrics) SetTracer(t SpanCounter) {
	m.scrape.mu.Lock()
	defer m.scrape.mu.Unlock()
	m.scrape.tracer = t
}

// scrapeCollector reads counters other packages already keep, so they cost
// nothing between scrapes.
type scrapeCollector struct {
	mu       sync.Mutex // guards journals and tracer
	journals [numProtocols]JournalStatser
	tracer   SpanCounter
}

func desc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

// journalDesc is a journal series, one per protocol engine.
func journalDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"protocol"}, nil)
}

var (
	journalBytesDesc       = journalDesc("jobgate_journal_bytes", "Size of the journal's segment files, counting records queued for writing.")
	journalSegmentsDesc    = journalDesc("jobgate_journal_segments", "Number of journal segment files.")
	journalFsyncsDesc      = journalDesc("jobgate_journal_fsyncs_total", "Fsyncs of journal segment files.")
	journalAppendsDesc     = journalDesc("jobgate_journal_appends_total", "Records appended to the journal, including those compaction rewrote.")
	journalCompactionsDesc = journalDesc("jobgate_journal_compactions_total", "Completed journal compactions.")
	journalLastFsyncDesc   = journalDesc("jobgate_journal_last_fsync_seconds", "Duration of the latest journal fsync.")
	journalFailedDesc      = journalDesc("jobgate_journal_failed", "1 when the journal has failed and refuses writes, else 0.")
	spansDroppedDesc       = desc("jobgate_tracing_spans_dropped_total", "Finished spans discarded because the export queue was full.")
	spansFailedDesc        = desc("jobgate_tracing_spans_export_failed_total", "Spans lost because their export failed.")
)

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{journalBytesDesc, journalSegmentsDesc, journalFsyncsDesc,
		journalAppendsDesc, journalCompactionsDesc, journalLastFsyncDesc, journalFailedDesc,
		spansDroppedDesc, spansFailedDesc} {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	journals, t := c.journals, c.tracer
	c.mu.Unlock()
	metric := func(d *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, typ, v, labels...)
	}
	for p, j := range journals {
		if j == nil {
			continue
		}
		s := j.Stats()
		failed := 0.0
		if s.Err != nil {
			failed = 1
		}
		proto := Protocol(p).String()
		metric(journalBytesDesc, prometheus.GaugeValue, float64(s.Bytes), proto)
		metric(journalSegmentsDesc, prometheus.GaugeValue, float64(s.Segments), proto)
		metric(journalFsyncsDesc, prometheus.CounterValue, float64(s.Syncs), proto)
		metric(journalAppendsDesc, prometheus.CounterValue, float64(s.Appends), proto)
		metric(journalCompactionsDesc, prometheus.CounterValue, float64(s.Compactions), proto)
		metric(journalLastFsyncDesc, prometheus.GaugeValue, s.LastSyncLatency.Seconds(), proto)
		metric(journalFailedDesc, prometheus.GaugeValue, failed, proto)
	}
	if t != nil {
		metric(spansDroppedDesc, prometheus.CounterValue, float64(t.Dropped()))
		metric(spansFailedDesc, prometheus.CounterValue, float64(t.ExportFailed()))
	}
}
