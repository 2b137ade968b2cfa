package beanstalk

// Reserved returns how many jobs the session holds reserved. The proxy
// reads it to enforce a per-connection cap on reservations.
func (s *Session) Reserved() int {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.reserved.len()
}

// Busy reports whether the session has work in hand: a reserve waiting for
// a job, or jobs reserved. A busy connection is never idle, however quiet.
func (s *Session) Busy() bool {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.waiting || s.durPending || s.reserved.len() > 0
}
