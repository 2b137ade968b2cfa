//go:build linux

package proxy

import "github.com/jobgate/jobgate/proxy/connlimit"

// outHigh is how much output may wait for a loop connection's client
// before its commands stop being served: bloopOutHigh, or a smaller
// write_buffer_limit (Limits.WriteBufferLimit), so that a reply rarely
// takes the output past the limit while the client keeps reading.
func (l *beanstalkLoop) outHigh() int {
	if n := l.srv.guard.current().WriteBufferLimit; n > 0 && n < bloopOutHigh {
		return n
	}
	return bloopOutHigh
}

// cutSlow closes b, and reports true, if more than write_buffer_limit of
// its output is still unwritten after a write: its client stopped reading,
// or reads too slowly. The output is dropped, as a Gearman connection's
// is.
func (l *beanstalkLoop) cutSlow(b *bloopConn) bool {
	n := l.srv.guard.current().WriteBufferLimit
	if n <= 0 || b.pending() <= n {
		return false
	}
	if s := l.srv.connSeries; s != nil {
		s.Cut(connlimit.ReasonSlowReader.String())
	}
	b.dead = true
	l.close(b)
	return true
}
