package gearman

// Assigned returns how many jobs the session's worker holds. The proxy
// reads it to enforce a per-connection cap on assigned jobs.
func (s *Session) Assigned() int {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.nrunning
}

// Busy reports whether the session has work in hand: a worker asleep
// after PRE_SLEEP or holding jobs, a client waiting for its foreground
// jobs, or replies held for the journal. A busy connection is never idle,
// however quiet.
func (s *Session) Busy() bool {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.sleeping || s.running.head != nil || s.attached != nil || len(s.held) > 0
}
