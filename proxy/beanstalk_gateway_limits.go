package proxy

import (
	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// busy reports whether a gateway connection has work in hand, for the idle
// timeout: a reserve waiting, or jobs reserved through the gateway (see
// track). It runs on the guard's sweeper.
func (s *bgwSession) busy() bool {
	return s.waiting.Load() || s.nReserved.Load() > 0
}

// overReserved is beanstalkConn.overReserved for the gateway: the jobs the
// connection holds are those the gateway passed on to it. The caller has
// settled the replies before a reserve-job, so the count is current.
func (s *bgwSession) overReserved(v wire.Verb) bool {
	if v != wire.Reserve && v != wire.ReserveWithTimeout && v != wire.ReserveJob {
		return false
	}
	max := s.c.srv.guard.current().MaxReservedPerConn
	return max > 0 && len(s.reserved) >= max
}

// draining reports whether the server is draining (Drain): puts through
// the gateway then answer DRAINING, as the engine's do, whichever backend
// the tube routes to.
func (gw *beanstalkGateway) draining() bool { return gw.drain.Load() }

// SetDraining turns beanstalkd's drain mode on or off (SIGUSR1): put
// answers DRAINING, through the gateway too, while connections are still
// accepted and everything else works. Drain also stops accepting.
func (s *BeanstalkServer) SetDraining(on bool) {
	s.eng.SetDraining(on)
	if s.gw != nil {
		s.gw.drain.Store(on)
	}
}

// Draining reports whether puts answer DRAINING.
func (s *BeanstalkServer) Draining() bool { return s.eng.Draining() }
