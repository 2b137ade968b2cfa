package proxy

// busy reports whether a gateway connection has work in hand, for the idle
// timeout: replies owed, a PRE_SLEEP, foreground jobs awaited, or the local
// engine's session busy. A connection that registered functions counts as
// busy for good: the jobs an upstream gearmand assigns it are not tracked
// here, and closing a worker in the middle of one would make gearmand run
// it again.
func (s *gwSession) busy() bool {
	// The engine's lock comes before s.mu.
	if s.local.local.sess.Busy() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sleeping || s.fifo.len() > 0 || len(s.abilities) > 0 || s.lineJobs > 0 {
		return true
	}
	for _, b := range s.backends {
		if b.pending.len() > 0 || len(b.foreground) > 0 {
			return true
		}
	}
	return false
}
