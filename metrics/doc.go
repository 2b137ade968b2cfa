// Package metrics defines jobgate's Prometheus metric set as typed handles,
// so the hot paths (a counter per command, a few per job) cost an atomic
// add and no allocation, and the set of series stays bounded.
//
// It is built on github.com/prometheus/client_golang: its exposition,
// histograms and Go/process collectors are correct and well known, and its
// per-series cost is an atomic add once a series has been resolved. What
// client_golang does not give for free is a resolution that is cheap on the
// hot path (CounterVec.WithLabelValues hashes the label values and takes a
// read lock on every call), so this package resolves each series once and
// caches the handle: commands in a fixed array indexed by protocol, command
// and result; function/tube names through a copy-on-write map
// ([Limiter]).
//
// # Metrics
//
// Label values of protocol are "gearman" and "beanstalk".
//
//	jobgate_build_info{version}                                gauge, always 1
//	jobgate_commands_total{protocol,command,result}            counter
//	jobgate_jobs_submitted_total{protocol,name}                counter
//	jobgate_jobs_completed_total{protocol,name}                counter
//	jobgate_jobs_failed_total{protocol,name}                   counter
//	jobgate_queue_wait_seconds{protocol,name}                  histogram: submit to hand-out
//	jobgate_job_run_seconds{protocol,name}                     histogram: hand-out to completion or failure
//	jobgate_queue_depth{protocol,name,state}                   gauge, at scrape time from a [QueueSource]
//	jobgate_names_tracked{protocol}                            gauge: names with their own label
//	jobgate_names_limit                                        gauge: the cap (MaxNames)
//	jobgate_backend_up{backend}                                gauge 1/0, from routing health
//	jobgate_breaker_state{backend}                             gauge 0 closed, 1 half-open, 2 open
//	jobgate_breaker_transitions_total{backend,to}              counter
//	jobgate_upstream_latency_seconds{backend}                  histogram: one upstream round trip
//	jobgate_connections{protocol}                              gauge: open client connections
//	jobgate_connections_accepted_total{protocol}               counter
//	jobgate_connections_rejected_total{protocol,reason}        counter: refused at accept
//	jobgate_connections_cut_total{protocol,reason}             counter: closed by a limit after accept
//	jobgate_tls_handshake_failures_total{protocol,reason}      counter: timeout, bad_certificate, protocol_version, other
//	jobgate_journal_fsync_seconds{protocol}                    histogram, observed by the journal's hook
//	jobgate_journal_bytes, jobgate_journal_segments{protocol}  gauges, at scrape time from journal Stats
//	jobgate_journal_fsyncs_total, jobgate_journal_appends_total,
//	jobgate_journal_compactions_total{protocol}                counters, at scrape time
//	jobgate_journal_last_fsync_seconds, jobgate_journal_failed gauges, at scrape time (protocol label)
//	jobgate_tracing_spans_dropped_total                        counter, at scrape time from the tracer
//	jobgate_tracing_spans_export_failed_total                  counter, at scrape time from the tracer
//
// plus the standard go_* and process_* collectors.
//
// # Cardinality
//
// command and result come from fixed tables; backend from the config;
// reason and state from constants here. name is the only label a client
// controls, so it goes through a [Limiter]: the first MaxNames distinct
// names of each protocol get their own series and every later one shares
// the name "_overflow". Per name and protocol there are 3 counters and 2
// histograms, 28 series with the default buckets, so the default MaxNames
// of 1000 bounds name series at 56,000 for both protocols; lower it on a
// busy shared Prometheus. The series of a name appear on its first use
// (a submission, or a queue depth reported at scrape time).
package metrics
