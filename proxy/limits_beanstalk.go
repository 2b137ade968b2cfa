package proxy

import (
	"io"
	"net"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/proxy/connlimit"
)

// beanstalkReject answers a connection refused for a limit. Beanstalk has
// no "too many connections" reply; OUT_OF_MEMORY is what beanstalkd says
// when it cannot take more, and clients read it as the answer to their
// first command (go-beanstalk: ErrOOM) rather than a bare EOF.
func beanstalkReject(c net.Conn, _ connlimit.Reason) {
	io.WriteString(c, "OUT_OF_MEMORY\r\n")
}

// SetLimits puts new connection limits in force; open connections stay.
func (s *BeanstalkServer) SetLimits(l Limits) { s.guard.set(l) }

// ShareConnections makes the server count its connections in group,
// shared with other servers, so that MaxConns and MaxConnsPerIP cap them
// all together. Call it before Serve.
func (s *BeanstalkServer) ShareConnections(group *connlimit.Group) { s.guard.share(group) }

// startWatch puts the connection under the timeouts.
func (c *beanstalkConn) startWatch(sess *engine.Session) {
	c.srv.guard.watch(&c.watch, sess.Busy, func(connlimit.Reason) { c.nc.Close() })
}

// overReserved reports whether a reserve must be refused because the
// connection holds MaxReservedPerConn jobs already. It then answers
// DEADLINE_SOON: a reply every client expects from reserve, meaning "you
// hold reserved jobs that need you first", so a worker finishes what it
// holds instead of collecting more. Leaving the reserve waiting would
// look like an empty queue while jobs are ready; TIMED_OUT would be a lie
// to a reserve without a timeout.
func (c *beanstalkConn) overReserved(sess *engine.Session, v wire.Verb) bool {
	if v != wire.Reserve && v != wire.ReserveWithTimeout && v != wire.ReserveJob {
		return false
	}
	max := c.srv.guard.current().MaxReservedPerConn
	return max > 0 && sess.Reserved() >= max
}

// beanstalkOut is the connection as the reply writer sees it: it tells
// the write timeout when a write is waiting for the client.
type beanstalkOut struct{ c *beanstalkConn }

// Write writes p to the connection.
func (o beanstalkOut) Write(p []byte) (int, error) {
	w := &o.c.watch
	w.setFlag(watchWriting, true)
	n, err := o.c.nc.Write(p)
	w.setFlag(watchWriting, false)
	if n > 0 {
		w.wrote.Add(1)
	}
	return n, err
}
