package metrics

import (
	"errors"
	"fmt"
	"testing"
	"time"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
	gmcodec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/routing"
)

type fakeJournal struct{ s journal.Stats }

func (f fakeJournal) Stats() journal.Stats { return f.s }

type fakeTracer struct{ dropped, failed uint64 }

func (f fakeTracer) Dropped() uint64      { return f.dropped }
func (f fakeTracer) ExportFailed() uint64 { return f.failed }

// connSamples returns the samples of the connection series of both
// protocols, all zero except those in nonzero.
func connSamples(want map[string]float64, nonzero map[string]float64) {
	for _, p := range []string{"gearman", "beanstalk"} {
		want[key("jobgate_connections", []string{"protocol=" + p})] = 0
		want[key("jobgate_connections_accepted_total", []string{"protocol=" + p})] = 0
		for _, r := range rejectReasons {
			want[key("jobgate_connections_rejected_total", []string{"protocol=" + p, "reason=" + r})] = 0
		}
		for _, r := range cutReasons {
			want[key("jobgate_connections_cut_total", []string{"protocol=" + p, "reason=" + r})] = 0
		}
		for _, r := range tlsFailReasons {
			want[key("jobgate_tls_handshake_failures_total", []string{"protocol=" + p, "reason=" + r})] = 0
		}
	}
	for k, v := range nonzero {
		want[k] = v
	}
}

// baseSamples are the series every Metrics exposes before any event.
func baseSamples(maxNames int) map[string]float64 {
	want := map[string]float64{
		`jobgate_build_info{version="test"}`:          1,
		`jobgate_names_tracked{protocol="gearman"}`:   0,
		`jobgate_names_tracked{protocol="beanstalk"}`: 0,
		`jobgate_names_limit`:                         float64(maxNames),
	}
	hist(want, "jobgate_journal_fsync_seconds", []string{"protocol=gearman"}, FsyncBuckets)
	hist(want, "jobgate_journal_fsync_seconds", []string{"protocol=beanstalk"}, FsyncBuckets)
	connSamples(want, nil)
	return want
}

func newTest(maxNames int) *Metrics {
	return New(Options{MaxNames: maxNames, Version: "test", NoRuntimeCollectors: true})
}

func TestScrapeEmpty(t *testing.T) {
	diff(t, scrape(t, newTest(0)), baseSamples(DefaultMaxNames))
}

// TestScrapeScripted records a scripted set of events and checks every
// jobgate_ sample of the exposition.
func TestScrapeScripted(t *testing.T) {
	m := newTest(0)

	for range 3 {
		m.Commands.Beanstalk(bscodec.Put, ResultOK)
	}
	m.Commands.Beanstalk(bscodec.ReserveWithTimeout, ResultMiss)
	m.Commands.Beanstalk(0, ResultClientError)
	m.Commands.Beanstalk(200, ResultClientError) // out of the verb table: unknown too
	m.Commands.Gearman(gmcodec.SubmitJob, ResultOK)
	m.Commands.Gearman(gmcodec.SubmitJob, ResultBackendError)
	m.Commands.Gearman(gmcodec.Type(99), ResultClientError)
	m.Commands.GearmanAdmin(ResultOK)
	m.Commands.Beanstalk(bscodec.Put, Result(77)) // out of range: server_error

	emails := m.Job(Beanstalk, "emails")
	emails.Submitted()
	emails.Submitted()
	emails.Started(500 * time.Millisecond)
	emails.Completed(2 * time.Second)
	m.JobBytes(Beanstalk, []byte("emails")).Failed(125 * time.Millisecond)
	m.Job(Gearman, "resize").Submitted()

	b := m.Backend("gm1")
	b.SetUp(false)
	b.SetBreakerState(BreakerOpen)
	b.ObserveLatency(250 * time.Millisecond)
	m.Backend("local") // created: up, closed
	if m.Backend("gm1") != b {
		t.Error("Backend returned a new handle for a known backend")
	}

	c := m.Conns(Beanstalk)
	c.Opened()
	c.Opened()
	c.Opened()
	c.Closed()
	c.Rejected(ReasonMaxPerIP)
	c.Cut(ReasonSlowReader)
	c.Cut("no such reason")
	m.Conns(Gearman).Rejected(ReasonMaxConnections)
	m.Conns(Gearman).HandshakeFailed(TLSFailBadCertificate)
	m.Conns(Gearman).HandshakeFailed("no such reason")

	m.ObserveFsync(Beanstalk, 2*time.Millisecond)
	m.SetJournal(Beanstalk, fakeJournal{journal.Stats{Segments: 2, Bytes: 4096, Appends: 10, Syncs: 4,
		LastSyncLatency: 3 * time.Millisecond, Compactions: 1, Err: errors.New("disk full")}})
	m.SetTracer(fakeTracer{dropped: 7, failed: 2})
	m.AddQueueSource(Beanstalk, QueueSourceFunc(func(emit func(string, QueueState, int)) {
		emit("emails", QueueReady, 4)
		emit("emails", QueueBuried, 1)
		emit("replayed", QueueDelayed, 2) // never submitted since start: admitted at scrape
	}))

	want := baseSamples(DefaultMaxNames)
	for k, v := range map[string]float64{
		`jobgate_commands_total{command="put",protocol="beanstalk",result="ok"}`:                    3,
		`jobgate_commands_total{command="put",protocol="beanstalk",result="server_error"}`:          1,
		`jobgate_commands_total{command="reserve-with-timeout",protocol="beanstalk",result="miss"}`: 1,
		`jobgate_commands_total{command="unknown",protocol="beanstalk",result="client_error"}`:      2,
		`jobgate_commands_total{command="SUBMIT_JOB",protocol="gearman",result="ok"}`:               1,
		`jobgate_commands_total{command="SUBMIT_JOB",protocol="gearman",result="backend_error"}`:    1,
		`jobgate_commands_total{command="unknown",protocol="gearman",result="client_error"}`:        1,
		`jobgate_commands_total{command="admin",protocol="gearman",result="ok"}`:                    1,
		`jobgate_jobs_submitted_total{name="emails",protocol="beanstalk"}`:                          2,
		`jobgate_jobs_completed_total{name="emails",protocol="beanstalk"}`:                          1,
		`jobgate_jobs_failed_total{name="emails",protocol="beanstalk"}`:                             1,
		`jobgate_jobs_submitted_total{name="resize",protocol="gearman"}`:                            1,
		`jobgate_jobs_completed_total{name="resize",protocol="gearman"}`:                            0,
		`jobgate_jobs_failed_total{name="resize",protocol="gearman"}`:                               0,
		`jobgate_jobs_submitted_total{name="replayed",protocol="beanstalk"}`:                        0,
		`jobgate_jobs_completed_total{name="replayed",protocol="beanstalk"}`:                        0,
		`jobgate_jobs_failed_total{name="replayed",protocol="beanstalk"}`:                           0,
		`jobgate_names_tracked{protocol="beanstalk"}`:                                               2,
		`jobgate_names_tracked{protocol="gearman"}`:                                                 1,
		`jobgate_queue_depth{name="emails",protocol="beanstalk",state="ready"}`:                     4,
		`jobgate_queue_depth{name="emails",protocol="beanstalk",state="buried"}`:                    1,
		`jobgate_queue_depth{name="replayed",protocol="beanstalk",state="delayed"}`:                 2,
		`jobgate_backend_up{backend="gm1"}`:                                                         0,
		`jobgate_backend_up{backend="local"}`:                                                       1,
		`jobgate_breaker_state{backend="gm1"}`:                                                      2,
		`jobgate_breaker_state{backend="local"}`:                                                    0,
		`jobgate_breaker_transitions_total{backend="gm1",to="open"}`:                                1,
		`jobgate_breaker_transitions_total{backend="gm1",to="closed"}`:                              0,
		`jobgate_breaker_transitions_total{backend="gm1",to="half-open"}`:                           0,
		`jobgate_breaker_transitions_total{backend="local",to="open"}`:                              0,
		`jobgate_breaker_transitions_total{backend="local",to="closed"}`:                            0,
		`jobgate_breaker_transitions_total{backend="local",to="half-open"}`:                         0,
		`jobgate_connections{protocol="beanstalk"}`:                                                 2,
		`jobgate_connections_accepted_total{protocol="beanstalk"}`:                                  3,
		`jobgate_connections_rejected_total{protocol="beanstalk",reason="max_connections_per_ip"}`:  1,
		`jobgate_connections_rejected_total{protocol="gearman",reason="max_connections"}`:           1,
		`jobgate_connections_cut_total{protocol="beanstalk",reason="slow_reader"}`:                  1,
		`jobgate_connections_cut_total{protocol="beanstalk",reason="other"}`:                        1,
		`jobgate_tls_handshake_failures_total{protocol="gearman",reason="bad_certificate"}`:         1,
		`jobgate_tls_handshake_failures_total{protocol="gearman",reason="other"}`:                   1,
		`jobgate_journal_bytes{protocol="beanstalk"}`:                                               4096,
		`jobgate_journal_segments{protocol="beanstalk"}`:                                            2,
		`jobgate_journal_appends_total{protocol="beanstalk"}`:                                       10,
		`jobgate_journal_fsyncs_total{protocol="beanstalk"}`:                                        4,
		`jobgate_journal_compactions_total{protocol="beanstalk"}`:                                   1,
		`jobgate_journal_last_fsync_seconds{protocol="beanstalk"}`:                                  0.003,
		`jobgate_journal_failed{protocol="beanstalk"}`:                                              1,
		`jobgate_tracing_spans_dropped_total`:                                                       7,
		`jobgate_tracing_spans_export_failed_total`:                                                 2,
	} {
		want[k] = v
	}
	bs := []string{"protocol=beanstalk", "name=emails"}
	hist(want, "jobgate_queue_wait_seconds", bs, QueueWaitBuckets, 0.5)
	hist(want, "jobgate_job_run_seconds", bs, RunBuckets, 2, 0.125)
	for _, l := range [][]string{{"protocol=gearman", "name=resize"}, {"protocol=beanstalk", "name=replayed"}} {
		hist(want, "jobgate_queue_wait_seconds", l, QueueWaitBuckets)
		hist(want, "jobgate_job_run_seconds", l, RunBuckets)
	}
	hist(want, "jobgate_upstream_latency_seconds", []string{"backend=gm1"}, LatencyBuckets, 0.25)
	hist(want, "jobgate_upstream_latency_seconds", []string{"backend=local"}, LatencyBuckets)
	hist(want, "jobgate_journal_fsync_seconds", []string{"protocol=beanstalk"}, FsyncBuckets, 0.002)

	// The first scrape admits "replayed", whose job series the registry may
	// or may not have gathered already (collectors run concurrently); from
	// the second on they are all there.
	scrape(t, m)
	diff(t, scrape(t, m), want)
}

// TestNameCap submits jobs for N+5 names with a cap of N: the first N get
// their own series, the last 5 share _overflow.
func TestNameCap(t *testing.T) {
	const n = 10
	m := newTest(n)
	for i := range n + 5 {
		m.Job(Gearman, fmt.Sprintf("fn%02d", i)).Submitted()
	}
	m.JobBytes(Gearman, []byte("fn00")).Submitted() // known name: own series
	m.JobBytes(Gearman, []byte("fn99")).Submitted() // new name past the cap

	got := scrape(t, m)
	submitted := map[string]float64{}
	for k, v := range got {
		if len(k) > len("jobgate_jobs_submitted_total") && k[:len("jobgate_jobs_submitted_total")] == "jobgate_jobs_submitted_total" {
			submitted[k] = v
		}
	}
	want := map[string]float64{}
	for i := range n {
		want[fmt.Sprintf(`jobgate_jobs_submitted_total{name="fn%02d",protocol="gearman"}`, i)] = 1
	}
	want[`jobgate_jobs_submitted_total{name="fn00",protocol="gearman"}`] = 2
	want[`jobgate_jobs_submitted_total{name="_overflow",protocol="gearman"}`] = 6
	diff(t, submitted, want)
	if v := got[`jobgate_names_tracked{protocol="gearman"}`]; v != n {
		t.Errorf("names_tracked = %v, want %d", v, n)
	}
	if got := m.NameLabel(Gearman, "fn03"); got != "fn03" {
		t.Errorf("NameLabel(fn03) = %q", got)
	}
	if got := m.NameLabel(Gearman, "fn12"); got != Overflow {
		t.Errorf("NameLabel(fn12) = %q, want %q", got, Overflow)
	}
	// The other protocol has its own cap.
	if got := m.NameLabel(Beanstalk, "fn12"); got != "fn12" {
		t.Errorf("beanstalk NameLabel(fn12) = %q", got)
	}
}

// TestQueueDepthOverflowSums checks that depths of names past the cap, and
// of the same name from two sources, are summed.
func TestQueueDepthOverflowSums(t *testing.T) {
	m := newTest(1)
	src := QueueSourceFunc(func(emit func(string, QueueState, int)) {
		emit("a", QueueReady, 1)
		emit("b", QueueReady, 2)
		emit("c", QueueReady, 3)
		emit("c", QueueState(200), 9) // not a state: ignored
	})
	m.AddQueueSource(Gearman, src)
	m.AddQueueSource(Gearman, src)
	got := scrape(t, m)
	want := map[string]float64{
		`jobgate_queue_depth{name="a",protocol="gearman",state="ready"}`:         2,
		`jobgate_queue_depth{name="_overflow",protocol="gearman",state="ready"}`: 10,
	}
	for k := range got {
		if len(k) > 19 && k[:19] == "jobgate_queue_depth" {
			continue
		}
		delete(got, k)
	}
	diff(t, got, want)
}

// TestBreakerNumbering keeps BreakerClosed/HalfOpen/Open in step with
// routing.BreakerState, which the wiring passes as uint8.
func TestBreakerNumbering(t *testing.T) {
	for _, c := range []struct {
		ours   uint8
		theirs routing.BreakerState
	}{{BreakerClosed, routing.BreakerClosed}, {BreakerHalfOpen, routing.BreakerHalfOpen}, {BreakerOpen, routing.BreakerOpen}} {
		if c.ours != uint8(c.theirs) || breakerNames[c.ours] != c.theirs.String() {
			t.Errorf("breaker state %d/%s, routing has %d/%s", c.ours, breakerNames[c.ours], uint8(c.theirs), c.theirs)
		}
	}
	m := newTest(0)
	m.Backend("x").SetBreakerState(9) // ignored, not a panic
}

// TestHotPathAllocs checks the per-command and per-job paths allocate
// nothing once their series exist.
func TestHotPathAllocs(t *testing.T) {
	m := newTest(2)
	name := []byte("known")
	m.JobBytes(Beanstalk, name).Submitted()
	m.Job(Beanstalk, "other")
	m.JobBytes(Beanstalk, []byte("third")) // cap reached: overflow made
	m.Commands.Beanstalk(bscodec.Put, ResultOK)
	m.Commands.Gearman(gmcodec.SubmitJob, ResultOK)
	unknown := []byte("never-seen")
	for what, f := range map[string]func(){
		"command":         func() { m.Commands.Beanstalk(bscodec.Put, ResultOK); m.Commands.Gearman(gmcodec.SubmitJob, ResultOK) },
		"known name":      func() { m.JobBytes(Beanstalk, name).Submitted() },
		"overflowed name": func() { m.JobBytes(Beanstalk, unknown).Submitted() },
		"job lifecycle": func() {
			s := m.JobBytes(Beanstalk, name)
			s.Started(time.Second)
			s.Completed(time.Second)
			s.Failed(time.Millisecond)
		},
		"conn":    func() { c := m.Conns(Gearman); c.Opened(); c.Closed(); c.Cut(ReasonIdle) },
		"backend": func() { m.Backend("b").ObserveLatency(time.Millisecond) },
	} {
		if what == "backend" {
			continue // Backend takes a lock by design: resolved once at wiring time
		}
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs per run", what, n)
		}
	}
}
