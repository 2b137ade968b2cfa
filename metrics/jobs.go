package metrics

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// JobSeries are the per-name job series of one function or tube (or of
// "_overflow"). Each method is an atomic add or a histogram observation; none
// allocates.
//
// What counts as what is the wiring's call, but it should be this:
// Submitted at SUBMIT_JOB*/put; Started when a job is handed to a worker
// (JOB_ASSIGN*, RESERVED), with the time since submission (or since it
// became ready, for a delayed or released job); Completed at WORK_COMPLETE
// or a delete of a reserved job; Failed at WORK_FAIL/WORK_EXCEPTION or a
// bury, with the time since Started.
type JobSeries struct {
	submitted, completed, failed prometheus.Counter
	wait, run                    prometheus.Observer
}

// Submitted counts a job accepted for the name.
func (s *JobSeries) Submitted() { s.submitted.Inc() }

// Started records a job handed to a worker after waiting wait in the queue.
func (s *JobSeries) Started(wait time.Duration) { s.wait.Observe(wait.Seconds()) }

// Completed counts a job finished successfully after running for run.
func (s *JobSeries) Completed(run time.Duration) {
	s.completed.Inc()
	s.run.Observe(run.Seconds())
}

// Failed counts a job that failed after running for run.
func (s *JobSeries) Failed(run time.Duration) {
	s.failed.Inc()
	s.run.Observe(run.Seconds())
}

// jobVecs are the vectors behind every JobSeries.
type jobVecs struct {
	submitted, completed, failed *prometheus.CounterVec
	wait, run                    *prometheus.HistogramVec
}

func (j *jobVecs) init(reg prometheus.Registerer) {
	labels := []string{"protocol", "name"}
	counter := func(name, help string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	j.submitted = counter("jobgate_jobs_submitted_total", "Jobs submitted (SUBMIT_JOB*, put) by function/tube name.")
	j.completed = counter("jobgate_jobs_completed_total", "Jobs completed (WORK_COMPLETE, delete of a reserved job) by name.")
	j.failed = counter("jobgate_jobs_failed_total", "Jobs failed (WORK_FAIL, WORK_EXCEPTION, bury) by name.")
	j.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jobgate_queue_wait_seconds",
		Help:    "Time a job waited in its queue before a worker got it.",
		Buckets: QueueWaitBuckets,
	}, labels)
	j.run = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jobgate_job_run_seconds",
		Help:    "Time from a worker getting a job to its completion or failure.",
		Buckets: RunBuckets,
	}, labels)
	reg.MustRegister(j.wait, j.run)
}

// series makes the series of one name label; the Limiter calls it once per
// label.
func (j *jobVecs) series(p Protocol, label string) *JobSeries {
	ps := p.String()
	return &JobSeries{
		submitted: j.submitted.WithLabelValues(ps, label),
		completed: j.completed.WithLabelValues(ps, label),
		failed:    j.failed.WithLabelValues(ps, label),
		wait:      j.wait.WithLabelValues(ps, label),
		run:       j.run.WithLabelValues(ps, label),
	}
}

// QueueState is the state label of jobgate_queue_depth.
type QueueState uint8

// The queue states. Beanstalk uses Ready, Delayed, Reserved and Buried;
// Gearman uses Ready (queued, waiting for a worker) and Running (assigned).
const (
	QueueReady QueueState = iota
	QueueDelayed
	QueueReserved
	QueueBuried
	QueueRunning
	numQueueStates
)

var queueStateNames = [numQueueStates]string{
	QueueReady:    "ready",
	QueueDelayed:  "delayed",
	QueueReserved: "reserved",
	QueueBuried:   "buried",
	QueueRunning:  "running",
}

// String returns the label value, e.g. "ready".
func (s QueueState) String() string {
	if s < numQueueStates {
		return queueStateNames[s]
	}
	return fmt.Sprintf("QueueState(%d)", uint8(s))
}

// QueueSource reports queue depths at scrape time; the engines (and
// upstream backends that can ask, e.g. with stats-tube) implement it.
// Depths are computed on demand because the engine already knows them:
// mirroring every enqueue and dequeue into a gauge would put a metric
// update on the hot path for a number read once per scrape.
type QueueSource interface {
	// QueueDepths calls emit once per name and state with the current
	// number of jobs. It runs on a scrape's goroutine, concurrently with
	// the engine, so it must take whatever lock it needs, should copy
	// and release it rather than call emit with it held for long, and
	// must not keep name past the call. Names the source omits have no
	// series in that scrape; emitting 0 for a known empty queue keeps
	// the series continuous.
	QueueDepths(emit func(name string, state QueueState, jobs int))
}

// QueueSourceFunc adapts a function to QueueSource.
type QueueSourceFunc func(emit func(name string, state QueueState, jobs int))

// QueueDepths calls f(emit).
func (f QueueSourceFunc) QueueDepths(emit func(name string, state QueueState, jobs int)) { f(emit) }

// AddQueueSource registers a source of jobgate_queue_depth for protocol p.
// Depths of the same name and state from several sources (or folded into
// "_overflow") are summed.
func (m *Metrics) AddQueueSource(p Protocol, src QueueSource) {
	m.queues.mu.Lock()
	defer m.queues.mu.Unlock()
	m.queues.sources = append(m.queues.sources, queueSource{p, src})
}

type queueSource struct {
	p   Protocol
	src QueueSource
}

// queueCollector turns the QueueSources into jobgate_queue_depth at scrape
// time.
type queueCollector struct {
	m       *Metrics
	mu      sync.Mutex // guards sources
	sources []queueSource
}

var queueDepthDesc = prometheus.NewDesc("jobgate_queue_depth",
	"Jobs per function/tube name and state, at scrape time.",
	[]string{"protocol", "name", "state"}, nil)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDepthDesc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := append([]queueSource(nil), c.sources...)
	c.mu.Unlock()
	type key struct {
		p     Protocol
		name  string
		state QueueState
	}
	sums := make(map[key]int)
	var order []key // first-seen order; the registry sorts anyway
	for _, s := range sources {
		s.src.QueueDepths(func(name string, state QueueState, jobs int) {
			if state >= numQueueStates {
				return
			}
			k := key{s.p, c.m.NameLabel(s.p, name), state}
			if _, ok := sums[k]; !ok {
				order = append(order, k)
			}
			sums[k] += jobs
		})
	}
	for _, k := range order {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue,
			float64(sums[k]), k.p.String(), k.name, k.state.String())
	}
}
