package beanstalk

// Reservation order. beanstalkd keeps a connection's reservations in a list
// in the order it made them and, when the connection closes, puts them back
// to ready in that order, each one going to a waiting connection at once.
// Which waiter gets which job is visible, so Close follows that order too,
// not the TTR order of Session.reserved. The job struct has no room left
// for a sequence number (job.go), so the session keeps its own list.

// noteReservedLocked records that s has just reserved j. The list may
// hold jobs no longer reserved by s (deleted, released, timed out) and
// repeats; it is pruned when it grows past twice the reservations, so its
// length stays bounded by what s holds.
func (s *Session) noteReservedLocked(j *job) {
	s.resOrder = append(s.resOrder, j)
	if len(s.resOrder) > 2*s.reserved.len()+16 {
		s.resOrder = s.heldInOrder(s.resOrder[:0:0])
	}
}

// heldInOrder appends to dst the jobs s still holds, oldest reservation
// first, each once (at its latest reservation).
func (s *Session) heldInOrder(dst []*job) []*job {
	start := len(dst)
	seen := make(map[*job]bool, s.reserved.len())
	for i := len(s.resOrder) - 1; i >= 0; i-- {
		j := s.resOrder[i]
		if seen[j] || !s.owns(j) {
			continue
		}
		seen[j] = true
		dst = append(dst, j)
	}
	for a, b := start, len(dst)-1; a < b; a, b = a+1, b-1 {
		dst[a], dst[b] = dst[b], dst[a]
	}
	return dst
}
