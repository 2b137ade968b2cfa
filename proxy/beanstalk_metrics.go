package proxy

import (
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/metrics"
)

// beanstalkResults classifies each Beanstalk reply for
// jobgate_commands_total, so a dashboard can tell client mistakes from
// jobgate trouble:
//
//	ok            INSERTED, BURIED (bury, release), RESERVED, DELETED,
//	              RELEASED, TOUCHED, USING, WATCHING, FOUND, KICKED, OK,
//	              PAUSED, and quit (no reply)
//	miss          NOT_FOUND, TIMED_OUT, DEADLINE_SOON, NOT_IGNORED
//	client_error  BAD_FORMAT, UNKNOWN_COMMAND, EXPECTED_CRLF, JOB_TOO_BIG
//	server_error  INTERNAL_ERROR (a journal failure), OUT_OF_MEMORY,
//	              DRAINING, BURIED <id> (a put buried for lack of memory)
//
// A line the codec refused counts under "unknown", except that JOB_TOO_BIG
// and EXPECTED_CRLF (whose line was a put) count under "put".
var beanstalkResults = func() (t [wire.UnknownCommand + 1]metrics.Result) {
	for i := range t {
		t[i] = metrics.ResultOK
	}
	for _, k := range []wire.ReplyKind{wire.NotFound, wire.TimedOut, wire.DeadlineSoon, wire.NotIgnored} {
		t[k] = metrics.ResultMiss
	}
	for _, k := range []wire.ReplyKind{wire.BadFormat, wire.UnknownCommand, wire.ExpectedCRLF, wire.JobTooBig} {
		t[k] = metrics.ResultClientError
	}
	for _, k := range []wire.ReplyKind{wire.InternalError, wire.OutOfMemory, wire.Draining, wire.BuriedID} {
		t[k] = metrics.ResultServerError
	}
	return t
}()

// beanstalkResult returns the result class of reply kind k.
func beanstalkResult(k wire.ReplyKind) metrics.Result {
	if int(k) < len(beanstalkResults) {
		return beanstalkResults[k]
	}
	return metrics.ResultServerError
}

// beanstalkObserver feeds the engine's job events into the per-tube job
// series. It runs under the engine lock; each call is a copy-on-write map
// lookup and an atomic add or histogram observation, with no allocation
// for a tube already admitted.
type beanstalkObserver struct{ m *metrics.Metrics }

var _ engine.Observer = beanstalkObserver{}

func (o beanstalkObserver) JobPut(tube string) { o.m.Job(metrics.Beanstalk, tube).Submitted() }

func (o beanstalkObserver) JobReserved(tube string, wait time.Duration) {
	o.m.Job(metrics.Beanstalk, tube).Started(wait)
}

func (o beanstalkObserver) JobDeleted(tube string, run time.Duration) {
	o.m.Job(metrics.Beanstalk, tube).Completed(run)
}

func (o beanstalkObserver) JobBuried(tube string, run time.Duration) {
	o.m.Job(metrics.Beanstalk, tube).Failed(run)
}

// beanstalkQueues adapts the engine's QueueDepths to metrics.QueueSource,
// keeping the engine free of metric types. Every tube reports all four
// states, zeros included, so its series stay continuous.
func beanstalkQueues(eng *engine.Engine) metrics.QueueSource {
	return metrics.QueueSourceFunc(func(emit func(string, metrics.QueueState, int)) {
		eng.QueueDepths(func(tube string, ready, reserved, delayed, buried int) {
			emit(tube, metrics.QueueReady, ready)
			emit(tube, metrics.QueueReserved, reserved)
			emit(tube, metrics.QueueDelayed, delayed)
			emit(tube, metrics.QueueBuried, buried)
		})
	})
}

// wireMetrics registers the engine's observer and queue depths with m.
func (s *BeanstalkServer) wireMetrics(m *metrics.Metrics) {
	s.metrics = m
	s.connSeries = m.Conns(metrics.Beanstalk)
	s.eng.SetObserver(beanstalkObserver{m})
	m.AddQueueSource(metrics.Beanstalk, beanstalkQueues(s.eng))
}
