package proxy

import (
	"bytes"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/proxy/auth"
	"github.com/jobgate/jobgate/routing"
)

// exec routes one client command. It returns the client connection's
// error (then the connection ends).
func (s *bgwSession) exec(cmd *wire.Command) error {
	// A reload applies from the next command on (beanstalk_gateway_reload.go).
	s.rt = s.gw.rt()
	return s.execIn(cmd)
}

// execIn is exec in the routing s.rt.
func (s *bgwSession) execIn(cmd *wire.Command) error {
	if s.gw.trace != nil {
		s.cmdStart = s.gw.trace.tr.Now()
	}
	// The direct path's checks, in its order: auth, then the reservation
	// cap (beanstalk_gateway_auth.go, beanstalk_gateway_limits.go).
	if s.c.auth != nil || s.c.srv.auth.Load() != nil || auth.IsReservedTube(cmd.Tube) {
		if done, err := s.authorize(cmd); done {
			return err
		}
	}
	s.countCommand(cmd.Verb)
	if cmd.Verb == wire.ReserveJob && s.c.srv.guard.current().MaxReservedPerConn > 0 {
		if err := s.settle(); err != nil { // count what the batch reserved so far
			return err
		}
	}
	if s.overReserved(cmd.Verb) {
		s.answer(cmd.Verb, wire.Reply{Kind: wire.DeadlineSoon})
		return nil
	}
	switch cmd.Verb {
	case wire.Use:
		s.used = append(s.used[:0], cmd.Tube...)
		s.orderRT = nil
		sl := s.answer(cmd.Verb, wire.Reply{Kind: wire.Using, Tube: s.used})
		// The backend that takes the next put uses the tube before the
		// client hears USING, as beanstalkd creates it at once; the
		// others hear of it if a put fails over to them.
		sl.hold()
		if be := s.producer(); be != nil {
			s.syncUse(be, sl)
		}
		s.release(sl)
	case wire.Watch:
		s.watchChanged()
		if !s.watches(cmd.Tube) {
			s.watched = append(s.watched, append([]byte(nil), cmd.Tube...))
		}
		sl := s.answer(cmd.Verb, wire.Reply{Kind: wire.Watching, Count: uint64(len(s.watched))})
		sl.hold()
		s.tell(cmd.Tube, sl)
		s.release(sl)
	case wire.Ignore:
		s.watchChanged()
		sl := s.ignore(cmd)
		sl.hold()
		for _, be := range s.open {
			s.syncWatch(be, sl)
		}
		s.release(sl)
	case wire.ListTubeUsed:
		s.answer(cmd.Verb, wire.Reply{Kind: wire.Using, Tube: s.used})
	case wire.ListTubesWatched:
		s.yaml.Reset()
		for _, t := range s.watched {
			s.yaml.ItemBytes(t)
		}
		s.answer(cmd.Verb, wire.Reply{Kind: wire.OK, Body: s.yaml.Bytes()})
	case wire.Put:
		s.put(cmd)
	case wire.ReserveJob, wire.Delete, wire.Release, wire.Bury, wire.Touch, wire.Peek, wire.KickJob, wire.StatsJob:
		s.byID(cmd)
	default:
		// The rest need several backends' answers: settle the batch so
		// far, then run them here.
		if err := s.settle(); err != nil {
			return err
		}
		switch cmd.Verb {
		case wire.Reserve, wire.ReserveWithTimeout:
			return s.reserve(cmd)
		case wire.PeekReady, wire.PeekDelayed, wire.PeekBuried:
			return s.peekUsed(cmd)
		case wire.Kick:
			return s.kick(cmd)
		case wire.Stats:
			return s.stats(cmd)
		case wire.ListTubes:
			return s.listTubes(cmd)
		case wire.StatsTube, wire.PauseTube:
			return s.tubeFanOut(cmd)
		}
		return s.write(cmd.Verb, &wire.Reply{Kind: wire.UnknownCommand})
	}
	return nil
}

// tell applies a watch to the backends of the tube's pool at once, opening
// sessions as needed, as beanstalkd creates the tube at once (a consumer
// reserves from all of them); the commands hold sl.
func (s *bgwSession) tell(tube []byte, sl *bgwSlot) {
	if !s.consumable(tube) {
		return // soft-denied: never sent upstream (beanstalk_gateway_auth.go)
	}
	p := s.rt.cfg.Rules.Match(tube)
	if p == nil {
		return
	}
	for _, b := range p.Backends() {
		if !b.Available() || !serves(b) {
			continue
		}
		if be, err := s.backend(b); err == nil {
			s.syncWatch(be, sl)
		}
	}
}

func (s *bgwSession) watches(t []byte) bool {
	for _, w := range s.watched {
		if bytes.Equal(w, t) {
			return true
		}
	}
	return false
}

// ignore is beanstalkd's: ignoring the last tube is NOT_IGNORED, one not
// watched is no error, and the last entry moves into the hole.
func (s *bgwSession) ignore(cmd *wire.Command) *bgwSlot {
	for i, w := range s.watched {
		if !bytes.Equal(w, cmd.Tube) {
			continue
		}
		if len(s.watched) < 2 {
			return s.answer(cmd.Verb, wire.Reply{Kind: wire.NotIgnored})
		}
		last := len(s.watched) - 1
		s.watched[i] = s.watched[last]
		s.watched[last] = nil
		s.watched = s.watched[:last]
		break
	}
	return s.answer(cmd.Verb, wire.Reply{Kind: wire.Watching, Count: uint64(len(s.watched))})
}

// producers returns the backends of the used tube's pool in hash order,
// the owner first (empty when no rule routes the tube). The order is kept
// until the used tube or the routing changes (orderRT), so that a put
// neither looks the rules up nor hashes the name.
func (s *bgwSession) producers() []*routing.Backend {
	if s.orderRT == s.rt {
		return s.order
	}
	s.order = s.order[:0]
	if p := s.rt.cfg.Rules.Match(s.used); p != nil {
		s.order = p.Order(s.used, s.order)
	}
	s.orderRT = s.rt
	return s.order
}

// producer returns the session of the first backend of the used tube's
// pool that is available and opens: the owner, else the next in hash
// order; nil when there is none.
func (s *bgwSession) producer() *bgwBackend {
	for _, b := range s.producers() {
		if !b.Available() {
			continue
		}
		if be, err := s.backend(b); err == nil {
			return be
		}
	}
	return nil
}

// put sends the job to the used tube's producer backend.
func (s *bgwSession) put(cmd *wire.Command) {
	t := s.gw.trace
	if s.gw.draining() {
		if t != nil {
			t.refused(s.used, len(cmd.Body), wire.Draining.String())
		}
		s.answer(cmd.Verb, wire.Reply{Kind: wire.Draining})
		return
	}
	be := s.producer()
	if be == nil {
		if t != nil {
			t.refused(s.used, len(cmd.Body), "backend_unavailable")
		}
		s.answer(cmd.Verb, internalError)
		return
	}
	s.syncUse(be, nil)
	sl := s.push(be, cmd.Verb)
	if t != nil {
		t.put(sl, s.used, cmd, be.b)
	}
	s.do(be, cmd, sl)
}

// byID sends a command naming a job to the backend the id names.
func (s *bgwSession) byID(cmd *wire.Command) {
	b, id := s.rt.cfg.IDs.Decode(cmd.ID)
	if !serves(b) {
		s.answer(cmd.Verb, wire.Reply{Kind: wire.NotFound})
		return
	}
	be, err := s.backend(b)
	if err != nil {
		s.answer(cmd.Verb, internalError)
		return
	}
	sl := s.push(be, cmd.Verb)
	sl.id, sl.pri, sl.delay = cmd.ID, cmd.Pri, cmd.Delay
	// The backend's id in cmd itself, put back after: Do does not retain
	// cmd, and a copy would escape to the heap through the interface.
	cmd.ID = id
	s.do(be, cmd, sl)
	cmd.ID = sl.id
}

// fan sends cmd to each backend of bs that is available and opens (prep,
// when not nil, readies the session first) and waits for the answers. The
// slots line up with bs; nil where nothing was sent. Recycle them with
// drop.
func (s *bgwSession) fan(bs []*routing.Backend, cmd *wire.Command, prep func(*bgwBackend)) []*bgwSlot {
	out := make([]*bgwSlot, len(bs))
	for i, b := range bs {
		if !b.Available() {
			continue
		}
		be, err := s.backend(b)
		if err != nil {
			continue
		}
		if prep != nil {
			prep(be)
		}
		out[i] = s.ask(be, cmd)
	}
	s.flushBackends()
	for _, sl := range out {
		if sl != nil {
			s.wait(sl)
		}
	}
	return out
}

func (s *bgwSession) drop(slots []*bgwSlot) {
	for _, sl := range slots {
		if sl != nil {
			s.recycle(sl)
		}
	}
}

// ok reports whether sl holds a reply of kind k.
func (sl *bgwSlot) ok(k wire.ReplyKind) bool {
	return sl != nil && sl.err == nil && sl.reply.Kind == k
}

// only returns the one slot of slots that holds a reply when exactly one
// backend was asked, for passing its answer on byte for byte.
func only(slots []*bgwSlot) *bgwSlot {
	if len(slots) == 1 && slots[0] != nil {
		return slots[0]
	}
	return nil
}

// peekUsed answers peek-ready/-delayed/-buried with the first job found on
// the used tube's backends, in hash order.
func (s *bgwSession) peekUsed(cmd *wire.Command) error {
	bs := append([]*routing.Backend(nil), s.producers()...)
	slots := s.fan(bs, cmd, s.prepUse)
	defer s.drop(slots)
	kind := wire.InternalError
	for _, sl := range slots {
		if sl.ok(wire.Found) {
			return s.writeSlot(sl)
		}
		if sl.ok(wire.NotFound) {
			kind = wire.NotFound
		}
	}
	return s.write(cmd.Verb, &wire.Reply{Kind: kind})
}

// kick kicks on the used tube's backends in hash order until the bound is
// used up.
func (s *bgwSession) kick(cmd *wire.Command) error {
	bs := append([]*routing.Backend(nil), s.producers()...)
	var kicked uint64
	answered := false
	for i, b := range bs {
		left := uint64(cmd.Bound) - kicked
		if left == 0 && (i > 0 || answered) {
			break
		}
		slots := s.fan([]*routing.Backend{b}, &wire.Command{Verb: wire.Kick, Bound: uint32(left)}, s.prepUse)
		if sl := slots[0]; sl.ok(wire.KickedCount) {
			answered = true
			kicked += min(sl.reply.Count, left)
		}
		s.drop(slots)
	}
	if !answered {
		return s.write(cmd.Verb, &internalError)
	}
	return s.write(cmd.Verb, &wire.Reply{Kind: wire.KickedCount, Count: kicked})
}

// tubeFanOut answers stats-tube (counters summed) and pause-tube (paused
// everywhere) from every backend of the tube's pool.
func (s *bgwSession) tubeFanOut(cmd *wire.Command) error {
	var bs []*routing.Backend
	if p := s.rt.cfg.Rules.Match(cmd.Tube); p != nil {
		bs = p.Backends()
	}
	slots := s.fan(bs, cmd, nil)
	defer s.drop(slots)
	if sl := only(slots); sl != nil {
		return s.writeSlot(sl)
	}
	kind := wire.InternalError
	var sum wire.TubeStats
	got := false
	for _, sl := range slots {
		switch {
		case sl.ok(wire.Paused):
			kind = wire.Paused
		case sl.ok(wire.OK):
			var st wire.TubeStats
			if st.ParseYAML(sl.reply.Body) != nil {
				continue
			}
			addTubeStats(&sum, &st, !got)
			got = true
		case sl.ok(wire.NotFound) && kind == wire.InternalError:
			kind = wire.NotFound
		}
	}
	if got {
		s.yaml.Reset()
		sum.AppendYAML(&s.yaml)
		return s.write(cmd.Verb, &wire.Reply{Kind: wire.OK, Body: s.yaml.Bytes()})
	}
	return s.write(cmd.Verb, &wire.Reply{Kind: kind})
}

// listTubes lists every routed backend's tubes once, in the order first
// seen.
func (s *bgwSession) listTubes(cmd *wire.Command) error {
	slots := s.fan(s.rt.routed, cmd, nil)
	defer s.drop(slots)
	if sl := only(slots); sl != nil {
		return s.writeSlot(sl)
	}
	names, ok := tubeUnion(slots)
	if !ok {
		return s.write(cmd.Verb, &internalError)
	}
	s.yaml.Reset()
	for _, n := range names {
		s.yaml.Item(n)
	}
	return s.write(cmd.Verb, &wire.Reply{Kind: wire.OK, Body: s.yaml.Bytes()})
}

// tubeUnion merges list-tubes answers; ok is false when none came.
func tubeUnion(slots []*bgwSlot) (names []string, ok bool) {
	seen := map[string]bool{}
	for _, sl := range slots {
		if !sl.ok(wire.OK) {
			continue
		}
		ok = true
		_ = wire.ParseList(sl.reply.Body, func(item []byte) {
			if !seen[string(item)] {
				seen[string(item)] = true
				names = append(names, string(item))
			}
		})
	}
	return names, ok
}

// stats sums every routed backend's counters; current-tubes counts the
// distinct tubes of all of them, and the connection and command counts
// are the gateway's own (bgwClients).
func (s *bgwSession) stats(cmd *wire.Command) error {
	slots := s.fan(s.rt.routed, cmd, nil)
	defer s.drop(slots)
	if sl := only(slots); sl != nil {
		return s.writeSlot(sl)
	}
	var sum wire.ServerStats
	got := false
	for _, sl := range slots {
		var st wire.ServerStats
		if !sl.ok(wire.OK) || st.ParseYAML(sl.reply.Body) != nil {
			continue
		}
		addServerStats(&sum, &st, !got)
		got = true
	}
	if !got {
		return s.write(cmd.Verb, &internalError)
	}
	lists := s.fan(s.rt.routed, &wire.Command{Verb: wire.ListTubes}, nil)
	if names, ok := tubeUnion(lists); ok {
		sum.CurrentTubes = uint64(len(names))
	}
	s.gw.ownClientCounts(&sum)
	s.drop(lists)
	s.yaml.Reset()
	sum.AppendYAML(&s.yaml)
	return s.write(cmd.Verb, &wire.Reply{Kind: wire.OK, Body: s.yaml.Bytes()})
}
