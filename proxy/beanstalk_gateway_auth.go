package proxy

import (
	"errors"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/routing"
)

// Auth on the gateway path shares the direct path's decisions
// (beanstalkConn.authorize, beanstalk_auth.go) through
// beanstalkAuthSession, which bgwSession implements here:
//   - Used, Watching: the gateway's own use and watch list.
//   - SetReserveFilter, Reservable: the filter decides which watched tubes
//     the backends hear of. A soft-denied watch joins the client's list
//     (WATCHING counts it, list-tubes-watched shows it) but is never sent
//     upstream, and reserve targets only the pools of consumable tubes, so
//     no backend can hand the connection a job from it (syncWatch,
//     reserveTargets).
//   - JobTube: a job the connection holds reserved through the gateway is
//     its own; for any other job the gateway asks the job's backend
//     (stats-job, one round trip, only while auth is on). A job the backend
//     does not know is passed on (the backend answers NOT_FOUND); a backend
//     that does not answer leaves the tube unknown, which only an identity
//     that may consume every tube passes.

// errCloseConn ends a gateway connection the auth policy closed (too many
// unknown tokens), after the replies owed.
var errCloseConn = errors.New("beanstalk gateway: connection closed by auth")

// SetReserveFilter sets the filter of the tubes reserve may take from.
func (s *bgwSession) SetReserveFilter(allow func(tube []byte) bool) {
	s.allow = allow
	s.watchChanged()
}

// Used returns the client's used tube.
func (s *bgwSession) Used() []byte { return s.used }

// Watching returns the length of the client's watch list.
func (s *bgwSession) Watching() int { return len(s.watched) }

// Reservable reports whether the filter passes any watched tube.
func (s *bgwSession) Reservable() bool {
	for _, t := range s.watched {
		if s.consumable(t) {
			return true
		}
	}
	return false
}

// consumable reports whether reserve may take jobs from tube t.
func (s *bgwSession) consumable(t []byte) bool { return s.allow == nil || s.allow(t) }

// JobTube returns the tube of the job the client calls id (see above).
// The bytes stay valid until the next call.
func (s *bgwSession) JobTube(id uint64) (tube []byte, mine, ok bool) {
	if _, mine := s.reserved[id]; mine {
		return nil, true, true
	}
	b, uid := s.rt.cfg.IDs.Decode(id)
	if !serves(b) {
		return nil, false, false // the gateway answers NOT_FOUND
	}
	be, err := s.backend(b)
	if err != nil {
		return nil, false, false // the command then answers INTERNAL_ERROR
	}
	sl := s.ask(be, &wire.Command{Verb: wire.StatsJob, ID: uid})
	s.flushBackends()
	s.wait(sl)
	defer s.recycle(sl)
	var st wire.JobStats
	switch {
	case sl.ok(wire.NotFound):
		return nil, false, false
	case sl.ok(wire.OK) && st.ParseYAML(sl.reply.Body) == nil:
		s.tubeBuf = append(s.tubeBuf[:0], st.Tube...)
		return s.tubeBuf, false, true
	}
	return nil, false, true // unknown tube: decided on the empty name
}

// authorize runs the auth policy on cmd, as serve does on the direct path.
// It reports whether the command was answered (queued) by auth; the error
// ends the connection.
func (s *bgwSession) authorize(cmd *wire.Command) (bool, error) {
	pol := s.c.srv.auth.Load()
	if pol != nil && (cmd.Verb == wire.Reserve || cmd.Verb == wire.ReserveWithTimeout) {
		// A denied reserve is held after the replies before it are out.
		if err := s.settle(); err != nil {
			return true, err
		}
	}
	var r wire.Reply
	if !s.c.authorize(pol, s, cmd, &r) {
		return false, nil
	}
	if r.Kind == 0 { // close
		if s.settle() == nil {
			s.wr.Flush()
		}
		return true, errCloseConn
	}
	s.answer(cmd.Verb, r)
	return true, nil
}

// reservation bookkeeping: the gateway knows which jobs the client holds
// from the replies it passes on, for auth (JobTube's mine), the idle
// timeout (busy), MaxReservedPerConn and the drain (Idle). A job whose
// TTR runs out on its backend is counted until the client's next command
// on it answers NOT_FOUND, or its backend session ends.

// track updates the reservations from the reply in sl, written to the
// client; r.ID is already the client's id.
func (s *bgwSession) track(sl *bgwSlot) {
	r := &sl.reply
	switch sl.verb {
	case wire.Reserve, wire.ReserveWithTimeout, wire.ReserveJob:
		if r.Kind == wire.Reserved {
			s.hold(r.ID, sl.be.b)
		}
	case wire.Delete, wire.Release, wire.Bury:
		if r.Kind == wire.Deleted || r.Kind == wire.Released || r.Kind == wire.Buried || r.Kind == wire.NotFound {
			s.unhold(sl.id)
		}
	case wire.Touch:
		if r.Kind == wire.NotFound {
			s.unhold(sl.id)
		}
	}
}

// hold records job id (the client's) reserved on b.
func (s *bgwSession) hold(id uint64, b *routing.Backend) {
	if s.reserved == nil {
		s.reserved = make(map[uint64]*routing.Backend)
	}
	// One map operation, not a look-up first: an id held already names
	// the same backend (ids encode it), so storing it again changes
	// nothing and the length tells.
	n := len(s.reserved)
	s.reserved[id] = b
	if len(s.reserved) == n {
		return
	}
	s.nReserved.Add(1)
	s.gw.reserved.Add(1)
}

// unhold forgets job id.
func (s *bgwSession) unhold(id uint64) {
	n := len(s.reserved)
	delete(s.reserved, id)
	if len(s.reserved) == n {
		return // not held
	}
	s.nReserved.Add(-1)
	s.gw.reserved.Add(-1)
}

// forget drops the reservations on b (nil: all), whose session ended.
func (s *bgwSession) forget(b *routing.Backend) {
	for id, rb := range s.reserved {
		if b == nil || rb == b {
			s.unhold(id)
			if t := s.gw.trace; t != nil {
				t.lost(id)
			}
		}
	}
}
