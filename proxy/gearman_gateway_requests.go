package proxy

import (
	"bytes"
	"sync/atomic"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/routing"
)

// Handle routes one request (gearmanHandler). See GearmanGateway for what
// goes where.
func (s *gwSession) Handle(p *codec.Packet) error {
	// One routing for the whole request: a reload between needsOpen and
	// handle must not find a backend needsOpen did not open.
	s.pin = s.gw.rt()
	if s.c.loop != nil && s.gw.trace == nil && p.Magic == codec.Req && isSubmit(p.Type) &&
		gwHandleHook.Load() == nil && s.fastSubmit(p) { // gearman_gateway_fast.go
		return nil
	}
	if s.c.loop != nil && s.needsOpen(p) {
		return s.handleOffLoop(p) // gearman_gateway_loop.go
	}
	if h := gwHandleHook.Load(); h != nil {
		(*h)()
	}
	err := s.handle(p)
	s.runActions()
	return err
}

// gwHandleHook, for tests, runs between Handle taking its routing and
// handling the request on the connection's own goroutine.
var gwHandleHook atomic.Pointer[func()]

// rt is the routing of the request being handled (Handle pins it).
func (s *gwSession) rt() *gwRouting {
	if s.pin != nil {
		return s.pin
	}
	return s.gw.rt()
}

func (s *gwSession) handle(p *codec.Packet) error {
	if p.Magic != codec.Req {
		s.answer(codec.Error, []byte(codec.CodeInvalidMagic), []byte(codec.TextRequestMagicExpected))
		return nil
	}
	a := p.Args
	switch p.Type {
	case codec.EchoReq:
		s.answer(codec.EchoRes, p.Data())
	case codec.SubmitJob, codec.SubmitJobBg, codec.SubmitJobHigh, codec.SubmitJobHighBg,
		codec.SubmitJobLow, codec.SubmitJobLowBg, codec.SubmitJobSched, codec.SubmitJobEpoch,
		codec.SubmitReduceJob, codec.SubmitReduceJobBackground:
		return s.submit(p)
	case codec.GetStatus:
		b, h := s.rt().cfg.Handles.Decode(a[0])
		if b == nil {
			s.answer(codec.StatusRes, a[0], zeroArg, zeroArg, zeroArg, zeroArg)
			return nil
		}
		return s.forward(b, p, h)
	case codec.GetStatusUnique:
		return s.statusUnique(p)
	case codec.WorkStatus, codec.WorkComplete, codec.WorkFail, codec.WorkException,
		codec.WorkData, codec.WorkWarning:
		b, h := s.rt().cfg.Handles.Decode(a[0])
		var bs *gwBackend
		if b != nil {
			bs, _ = s.session(b)
		}
		if bs == nil {
			s.answer(codec.Error, []byte(codec.CodeJobNotFound), []byte(workNotFoundText(p.Type)))
			return nil
		}
		if s.gw.trace != nil {
			s.gw.trace.work(s, p)
		}
		return s.send(bs, s.rehandled(p, h), nil)
	case codec.OptionReq:
		if !bytes.EqualFold(a[0], []byte("exceptions")) {
			s.answer(codec.Error, []byte(codec.CodeUnknownOption), []byte(codec.TextUnknownOption))
			return nil
		}
		s.mu.Lock()
		s.exceptions = true
		open := append([]*gwBackend{s.local}, s.backends...)
		s.mu.Unlock()
		s.answer(codec.OptionRes, a[0])
		for _, bs := range open {
			if err := s.send(bs, p, &gwReply{discard: true}); err != nil {
				return err
			}
		}
	case codec.SetClientID:
		s.mu.Lock()
		s.clientID = append([]byte{}, a[0]...) // not nil: an empty id is replayed too
		open := append([]*gwBackend{s.local}, s.backends...)
		s.mu.Unlock()
		for _, bs := range open {
			if err := s.send(bs, p, nil); err != nil {
				return err
			}
		}
	case codec.CanDo, codec.CanDoTimeout:
		return s.canDo(p)
	case codec.CantDo:
		return s.cantDo(p)
	case codec.ResetAbilities:
		s.mu.Lock()
		clear(s.abilities)
		s.workerSet = nil
		open := append([]*gwBackend{s.local}, s.backends...)
		s.mu.Unlock()
		for _, bs := range open {
			if err := s.send(bs, p, nil); err != nil {
				return err
			}
		}
	case codec.PreSleep:
		s.mu.Lock()
		s.sleeping = true
		set := append([]*routing.Backend(nil), s.workerSet...)
		s.mu.Unlock()
		for _, b := range set {
			if bs, err := s.session(b); err == nil {
				if err := s.send(bs, p, nil); err != nil {
					return err
				}
			}
		}
	case codec.GrabJob, codec.GrabJobUniq, codec.GrabJobAll:
		s.mu.Lock()
		s.sleeping = false
		n := len(s.workerSet)
		r := newGrabReply(p.Type, n)
		if s.gw.trace != nil {
			r.trace = &gwJobTrace{start: s.gw.trace.tr.Now()}
		}
		for i := range n {
			r.grab.left = append(r.grab.left, s.workerSet[(s.grabNext+i)%n])
		}
		if n > 0 {
			s.grabNext = (s.grabNext + 1) % n
		}
		s.fifo.push(r)
		s.mu.Unlock()
		s.grabOn(r, false)
	default:
		// Response types, ALL_YOURS, type 5: as the engine answers.
		s.answer(codec.Error, []byte(codec.CodeInvalidCommand), []byte(codec.TextCommandNotExpected))
	}
	return nil
}

var zeroArg = []byte("0")

// workNotFoundText is gearmand's text for a WORK_* on an unknown job.
func workNotFoundText(t codec.Type) string {
	switch t {
	case codec.WorkData, codec.WorkWarning:
		return codec.TextJobDoesNotExist
	case codec.WorkException:
		return codec.TextExceptionJobNotFound
	}
	return codec.TextJobNotFoundWorkResult
}

// rehandled returns p with its handle (argument 0) replaced by h, in the
// session's own packet, which aliases p's other arguments: valid until
// the next call. That is long enough: a session handles one request at a
// time, and backends do not keep what they are sent.
func (s *gwSession) rehandled(p *codec.Packet, h []byte) *codec.Packet {
	if bytes.Equal(h, p.Args[0]) {
		return p
	}
	n := copy(s.fwdArgs[:], p.Args)
	s.fwdArgs[0] = h
	s.fwd = codec.Packet{Magic: p.Magic, Type: p.Type, Args: s.fwdArgs[:n]}
	return &s.fwd
}

// forward sends a request that gets one reply to b, with its handle
// replaced by h when h is not nil.
func (s *gwSession) forward(b *routing.Backend, p *codec.Packet, h []byte) error {
	r := &gwReply{}
	s.push(r)
	bs, err := s.session(b)
	if err != nil {
		s.mu.Lock()
		s.failLocked(b, r, err.Error())
		s.flushFIFOLocked()
		s.mu.Unlock()
		return nil
	}
	if h != nil {
		p = s.rehandled(p, h)
	}
	return s.send(bs, p, r)
}

// submit sends a SUBMIT_* to the first backend of the function's pool that
// is available and opens: the owner, else the next in hash order.
func (s *gwSession) submit(p *codec.Packet) error {
	var start time.Time
	if s.gw.trace != nil {
		start = s.gw.trace.tr.Now()
	}
	fn := p.Function()
	pool := s.rt().cfg.Rules.Match(fn)
	if pool == nil {
		s.answer(codec.Error, []byte(codec.CodeQueueError), []byte("jobgate: no route for function "+string(fn)))
		if s.gw.trace != nil {
			s.gw.trace.refused(p, start)
		}
		return nil
	}
	r := &gwReply{}
	switch p.Type {
	case codec.SubmitJob, codec.SubmitJobHigh, codec.SubmitJobLow, codec.SubmitReduceJob:
		r.fg = true
	}
	s.push(r)
	var stack [8]*routing.Backend
	why := "no backend available"
	for _, b := range pool.Order(fn, stack[:0]) {
		if !b.Available() {
			continue
		}
		if s.wantsLine(p.Type, b) {
			l := s.liveLine(b)
			if l == nil {
				s.mu.Lock()
				why = s.notOpenLocked(b).Error()
				s.mu.Unlock()
				continue
			}
			if s.gw.trace != nil {
				s.gw.trace.submit(r, p, b, start)
			}
			s.sendLine(l, p, r, nil)
			return nil
		}
		bs, err := s.session(b)
		if err != nil {
			why = err.Error()
			continue
		}
		if s.gw.trace != nil {
			s.gw.trace.submit(r, p, b, start)
		}
		return s.send(bs, p, r)
	}
	if s.gw.trace != nil {
		s.gw.trace.refused(p, start)
	}
	s.mu.Lock()
	r.out = codec.AppendPacket(nil, codec.Res, codec.Error, []byte(codec.CodeQueueError),
		[]byte("jobgate: function "+string(fn)+": "+why))
	r.done = true
	s.flushFIFOLocked()
	s.mu.Unlock()
	return nil
}

// canDo registers a function on every backend of its pool.
func (s *gwSession) canDo(p *codec.Packet) error {
	fn := p.Function()
	pool := s.rt().cfg.Rules.Match(fn)
	if pool == nil {
		return nil // nothing is ever submitted to it
	}
	a := &gwAbility{backends: pool.Backends()}
	if p.Type == codec.CanDoTimeout {
		a.timeout = append([]byte(nil), p.Arg(1)...)
	}
	// Register and look the sessions up in one critical section: a
	// session opened after it replays this ability (session), one opened
	// before gets it here, so each backend gets it exactly once.
	open := make([]*gwBackend, len(a.backends))
	s.mu.Lock()
	s.abilities[string(fn)] = a
	s.rebuildWorkerSetLocked()
	for i, b := range a.backends {
		if b.ID == routing.LocalID {
			open[i] = s.local
		} else {
			open[i] = s.findLocked(b)
		}
	}
	s.gw.own.join(s) // the merged admin listings count it once
	s.mu.Unlock()
	for i, b := range a.backends {
		if open[i] == nil {
			// Opening the session replays every ability, this one
			// included; one that fails to open replays it later.
			_, _ = s.session(b)
			continue
		}
		if err := s.send(open[i], p, nil); err != nil {
			return err
		}
	}
	return nil
}

// cantDo unregisters a function where it was registered.
func (s *gwSession) cantDo(p *codec.Packet) error {
	fn := p.Function()
	s.mu.Lock()
	a := s.abilities[string(fn)]
	delete(s.abilities, string(fn))
	s.rebuildWorkerSetLocked()
	s.mu.Unlock()
	if a == nil {
		return nil
	}
	for _, b := range a.backends {
		var bs *gwBackend
		if b.ID == routing.LocalID {
			bs = s.local
		} else if bs = s.find(b); bs == nil {
			continue
		}
		if err := s.send(bs, p, nil); err != nil {
			return err
		}
	}
	return nil
}

// rebuildWorkerSetLocked recomputes the backends the worker uses, in the
// order its functions' pools list them.
func (s *gwSession) rebuildWorkerSetLocked() {
	s.workerSet = s.workerSet[:0]
	for _, a := range s.abilities {
		for _, b := range a.backends {
			if !s.usesLocked(b) {
				s.workerSet = append(s.workerSet, b)
			}
		}
	}
	// Map order is random: sort by id so that the rotation is fair.
	ws := s.workerSet
	for i := 1; i < len(ws); i++ {
		for j := i; j > 0 && ws[j-1].ID > ws[j].ID; j-- {
			ws[j-1], ws[j] = ws[j], ws[j-1]
		}
	}
}

// tryGrab sends r's GRAB_JOB* to the next backend it has not tried, and
// writes it at once, or answers NO_JOB when none is left. It is for a grab
// that moves on outside the read loop's handling of requests (after a
// NO_JOB, or off the event loop); the read loop itself uses grabOn.
func (s *gwSession) tryGrab(r *gwReply) { s.grabOn(r, true) }

// grabOn is tryGrab; with flush false the request is left for the read
// loop's flushBackends, which writes it with the rest of the batch.
func (s *gwSession) grabOn(r *gwReply, flush bool) {
	for {
		s.mu.Lock()
		if len(r.grab.left) == 0 || s.closed {
			r.grab = nil
			r.out = noJobReply
			r.done = true
			s.flushFIFOLocked()
			s.mu.Unlock()
			return
		}
		b := r.grab.left[0]
		r.grab.left = r.grab.left[1:]
		typ := r.grab.typ
		s.mu.Unlock()
		if !b.Available() {
			continue
		}
		bs, err := s.session(b)
		if err == errNotOpen {
			s.grabOffLoop(r, b)
			return
		}
		if err != nil {
			continue
		}
		_ = s.send(bs, grabRequest(typ), r)
		if flush && bs.conn != nil && bs.dirty.Swap(false) {
			_ = bs.conn.Flush()
		}
		return
	}
}

// statusUnique asks every routed backend for a GET_STATUS_UNIQUE: a unique
// id names no function, so it has no route. The first backend that knows
// the job answers; "unknown" when none does.
func (s *gwSession) statusUnique(p *codec.Packet) error {
	rt := s.rt()
	targets := rt.routed
	if rt.local {
		targets = append([]*routing.Backend{s.local.b}, targets...)
	}
	par := &gwReply{need: len(targets),
		out: codec.AppendPacket(nil, codec.Res, codec.StatusResUnique, p.Args[0], zeroArg, zeroArg, zeroArg, zeroArg, zeroArg)}
	if len(targets) == 0 {
		par.done = true
	}
	s.push(par)
	for _, b := range targets {
		part := &gwReply{parent: par}
		bs, err := s.session(b)
		if err != nil {
			s.mu.Lock()
			s.partLocked(part, nil)
			s.flushFIFOLocked()
			s.mu.Unlock()
			continue
		}
		if err := s.send(bs, p, part); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.flushFIFOLocked()
	s.mu.Unlock()
	return nil
}
