package proxy

import (
	"net"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy/connlimit"
)

// gearmanReject answers a connection refused for a limit with an ERROR
// packet, which a client reads as the reply to its first request.
func gearmanReject(c net.Conn, r connlimit.Reason) {
	c.Write(codec.AppendPacket(nil, codec.Res, codec.Error,
		[]byte("TOO_MANY_CONNECTIONS"), []byte("jobgate: "+r.String()+" reached")))
}

// SetLimits puts new connection limits in force; open connections stay.
func (s *GearmanServer) SetLimits(l Limits) { s.guard.set(l) }

// ShareConnections makes the server count its connections in group,
// shared with other servers, so that MaxConns and MaxConnsPerIP cap them
// all together. Call it before Serve.
func (s *GearmanServer) ShareConnections(group *connlimit.Group) { s.guard.share(group) }

// maxOutput is the output a connection may queue before it is cut off as a
// slow reader.
func (s *GearmanServer) maxOutput() int {
	if n := s.guard.current().WriteBufferLimit; n > 0 {
		return n
	}
	return s.cfg.MaxOutput
}

// countCut counts a connection cut off by a limit.
func (s *GearmanServer) countCut(r connlimit.Reason) {
	if s.connSeries != nil {
		s.connSeries.Cut(r.String())
	}
}

// startWatch puts the connection under the timeouts.
func (c *gearmanConn) startWatch() {
	c.srv.guard.watch(&c.watch, c.busy, func(connlimit.Reason) { c.close() })
}

// busy reports whether the connection has work in hand (engine or
// gateway session).
func (c *gearmanConn) busy() bool {
	if c.engine != nil {
		return c.engine.Busy()
	}
	if gs, ok := c.sess.(*gwSession); ok {
		return gs.busy()
	}
	return true
}

// limitPacket answers, in place of the session, a request that a limit or
// the drain refuses, and reports whether it did. Only the packet types
// named here cost more than the switch.
func (c *gearmanConn) limitPacket(t codec.Type) bool {
	switch t {
	case codec.GrabJob, codec.GrabJobUniq, codec.GrabJobAll:
		max := c.srv.guard.current().MaxReservedPerConn
		if max <= 0 || c.engine == nil || c.engine.Assigned() < max {
			return false
		}
		// gearmand's answer to a worker when there is nothing for it: the
		// worker sends PRE_SLEEP and is woken by NOOP as usual.
		// Through the engine, behind replies held for the journal.
		c.authReply(gearman.OutcomeMiss, codec.NoJob)
		return true
	case codec.SubmitJob, codec.SubmitJobBg, codec.SubmitJobHigh, codec.SubmitJobHighBg,
		codec.SubmitJobLow, codec.SubmitJobLowBg, codec.SubmitJobSched, codec.SubmitJobEpoch,
		codec.SubmitReduceJob, codec.SubmitReduceJobBackground:
		if !c.srv.draining.Load() {
			return false
		}
		// In request order: behind replies held for the journal or owed
		// by upstream servers, or the client would pin the error on an
		// earlier submission.
		c.authReply(gearman.OutcomeServerError, codec.Error, drainingError...)
		return true
	}
	return false
}

// drainingError is the ERROR packet a submission gets while the server
// drains. gearmand has no drain; QUEUE_ERROR is its code for "the job
// could not be queued", which clients report as a failed submission
// (nothing was created), so a producer retries elsewhere or later.
var drainingError = [][]byte{[]byte("QUEUE_ERROR"), []byte("jobgate is draining: not accepting new jobs")}
