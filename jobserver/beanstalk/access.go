package beanstalk

// What an access-control layer in front of a Session needs from it: which
// watched tubes a reserve may take from, and the tube of a job named by id.
// The engine itself grants everything; the proxy decides.

// SetReserveFilter restricts reserve to the watched tubes for which allow
// returns true; the others stay in the watch list (list-tubes-watched
// shows them) but are never reserved from nor waited on. nil lifts the
// restriction. allow is called with the engine lock held, only from Exec
// (reserve and reserve-with-timeout), so it may read state owned by the
// session's own goroutine; it must not call into the engine. A reserve
// already waiting keeps the tubes it waits on.
func (s *Session) SetReserveFilter(allow func(tube []byte) bool) {
	s.e.mu.Lock()
	s.allow = allow
	s.e.mu.Unlock()
}

// mayReserve reports whether reserve may take jobs from t.
func (s *Session) mayReserve(t *tube) bool {
	return s.allow == nil || s.allow(t.nameB)
}

// Reservable reports whether a reserve could take a job from any watched
// tube, that is whether the reserve filter passes any of them.
func (s *Session) Reservable() bool {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	for _, t := range s.watch {
		if s.mayReserve(t) {
			return true
		}
	}
	return false
}

// Watching returns how many tubes the session watches: the count a
// WATCHING reply carries.
func (s *Session) Watching() int {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return len(s.watch)
}

// JobTube returns the tube of job id and whether this session holds it
// reserved; ok is false when no such job exists. A job never changes tubes,
// so the answer stays true for as long as the job lives. The tube's bytes
// stay valid while the job or any session refers to the tube; copy them to
// keep them longer.
func (s *Session) JobTube(id uint64) (tube []byte, mine, ok bool) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.visible(id)
	if j == nil || j.tube == nil {
		return nil, false, false
	}
	return j.tube.nameB, s.owns(j), true
}

// Used returns the name of the tube the session uses. The bytes stay valid
// as long as the session uses the tube.
func (s *Session) Used() []byte {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.use.nameB
}
