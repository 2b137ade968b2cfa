package beanstalk

// Reservation order. beanstalkd keeps a connection's reservations in a list
// in the order it made them and, when the connection closes, puts them back
// to ready in that order, each one going to a waiting connection at once.
// Which waiter gets which job is visible, so Close follows that order too,
// not the TTR order of Session.reserved. The job struct has no room left
// for a sequence number (job.go), so the session keeps its own list.

// resEntry is one reservation: the job and its reserve count then, which
// tells a current entry from one left by an earlier reservation of the
// same job.
type resEntry struct {
	j *job
	n uint32
}

// current reports whether s still holds the reservation e records.
func (s *Session) current(e resEntry) bool {
	return e.n == e.j.reserves && s.owns(e.j)
}

// noteReservedLocked records that s has just reserved j (after
// reserveLocked counted it). Entries that are no longer current (the job
// deleted, released, timed out, or reserved again) are dropped, in place,
// when the list grows past twice the reservations held, so its length
// stays bounded by what s holds.
func (s *Session) noteReservedLocked(j *job) {
	s.resOrder = append(s.resOrder, resEntry{j, j.reserves})
	if len(s.resOrder) <= 2*s.reserved.len()+16 {
		return
	}
	kept := s.resOrder[:0]
	for _, e := range s.resOrder {
		if s.current(e) {
			kept = append(kept, e)
		}
	}
	clear(s.resOrder[len(kept):])
	s.resOrder = kept
}
