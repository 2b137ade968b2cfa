package proxy

import (
	"errors"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/metrics"
)

// gearmanOutcomes maps the engine's classification of a reply to the
// result label of jobgate_commands_total. Per request packet type (the
// command label), the result is:
//
//	ok            any reply but the ones below (JOB_CREATED, JOB_ASSIGN*,
//	              STATUS_RES, ECHO_RES, OPTION_RES, ...), or none (CAN_DO,
//	              WORK_*, PRE_SLEEP, ...)
//	miss          NO_JOB; ERROR JOB_NOT_FOUND (a WORK_* packet for a job
//	              the worker does not hold)
//	client_error  ERROR INVALID_MAGIC, INVALID_COMMAND, INVALID_ARGUMENT,
//	              UNKNOWN_OPTION, ARGUMENT_TOO_LARGE; an ERROR the codec
//	              answers for a malformed frame; a malformed packet that
//	              closes the connection (counted as "unknown" when the
//	              codec could not tell its type)
//	server_error  ERROR QUEUE_ERROR (queue full, journal failure)
//
// Text admin lines all count under the command "admin": ok, or
// client_error for a line the session refused. Through a gateway
// (GearmanConfig.Gateway) the replies come from several places, so a
// request counts ok unless the session refuses it (client_error).
var gearmanOutcomes = [...]metrics.Result{
	gearman.OutcomeOK:          metrics.ResultOK,
	gearman.OutcomeMiss:        metrics.ResultMiss,
	gearman.OutcomeClientError: metrics.ResultClientError,
	gearman.OutcomeServerError: metrics.ResultServerError,
}

// countFrame counts one handled frame; err is what handling it returned.
// The caller checks that metrics are on, so a server without them pays a
// nil check per frame.
func (c *gearmanConn) countFrame(f *codec.Frame, err error) {
	m := c.srv.metrics
	if f.Kind == codec.KindText {
		r := metrics.ResultOK
		if err != nil {
			r = metrics.ResultClientError
		}
		m.Commands.GearmanAdmin(r)
		return
	}
	r := metrics.ResultOK
	switch {
	case err == errStatusKeyTooLong: // refused before the engine saw it
		r = metrics.ResultClientError
	case c.engine != nil:
		if o := c.engine.Outcome(); int(o) < len(gearmanOutcomes) {
			r = gearmanOutcomes[o]
		}
	case err != nil:
		r = metrics.ResultClientError
	}
	m.Commands.Gearman(f.Packet.Type, r)
}

// countProtocolError counts a frame the codec refused as a client error.
func (c *gearmanConn) countProtocolError(err error) {
	var pe *codec.ProtocolError
	if !errors.As(err, &pe) {
		return // a read error or EOF: no request
	}
	if errors.Is(pe, codec.ErrLineTooLong) {
		c.srv.metrics.Commands.GearmanAdmin(metrics.ResultClientError)
		return
	}
	c.srv.metrics.Commands.Gearman(pe.Type, metrics.ResultClientError)
}

// gearmanObserver feeds the engine's job events into the per-function job
// series. It runs under the engine lock; each call is a copy-on-write map
// lookup and an atomic add or histogram observation, with no allocation
// for a function already admitted.
type gearmanObserver struct{ m *metrics.Metrics }

var _ gearman.Observer = gearmanObserver{}

func (o gearmanObserver) JobSubmitted(fn string) { o.m.Job(metrics.Gearman, fn).Submitted() }

func (o gearmanObserver) JobStarted(fn string, wait time.Duration) {
	o.m.Job(metrics.Gearman, fn).Started(wait)
}

func (o gearmanObserver) JobCompleted(fn string, run time.Duration) {
	o.m.Job(metrics.Gearman, fn).Completed(run)
}

func (o gearmanObserver) JobFailed(fn string, run time.Duration) {
	o.m.Job(metrics.Gearman, fn).Failed(run)
}

// gearmanQueues adapts the engine's QueueDepths to metrics.QueueSource,
// keeping the engine free of metric types: ready (queued) and running per
// function, zeros included, so the series stay continuous.
func gearmanQueues(e *gearman.Engine) metrics.QueueSource {
	return metrics.QueueSourceFunc(func(emit func(string, metrics.QueueState, int)) {
		e.QueueDepths(func(fn string, queued, running int) {
			emit(fn, metrics.QueueReady, queued)
			emit(fn, metrics.QueueRunning, running)
		})
	})
}

// wireMetrics registers the engine's observer and queue depths with m.
func (s *GearmanServer) wireMetrics(m *metrics.Metrics) {
	s.metrics = m
	s.connSeries = m.Conns(metrics.Gearman)
	s.engine.SetObserver(gearmanObserver{m})
	m.AddQueueSource(metrics.Gearman, gearmanQueues(s.engine))
}
