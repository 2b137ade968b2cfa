package proxy

import "github.com/jobgate/jobgate/tracing"

// openSlots is the size of openSpans' ring: a power of two.
const openSlots = 1024

// openSpans holds the open process span of each running traced job of
// the local engine, by job id. The engine numbers jobs in order and most
// run briefly, so a ring indexed by the id's low bits holds nearly all of
// them, without the map insert and delete per job that profiled at about
// 0.1 µs (docs/BENCHMARKS.md, Tracing, round 14); a job whose slot a
// running job 1024 ids older still holds goes to the map instead. The
// zero value is ready; the caller guards it (gearmanTrace.mu).
type openSpans struct {
	ring [openSlots]openSlot
	more map[uint64]tracing.Process // the jobs whose slot was taken
}

// openSlot is one slot of the ring: the job id (0: free) and its span.
type openSlot struct {
	id uint64
	p  tracing.Process
}

// put makes p job id's open span and returns the one it had (the zero
// Process if none).
func (o *openSpans) put(id uint64, p tracing.Process) (old tracing.Process) {
	s := &o.ring[id&(openSlots-1)]
	switch {
	case s.id == id:
		old, s.p = s.p, p
	case s.id == 0:
		s.id, s.p = id, p
		// A job whose slot was taken when it was put may still be in more.
		if len(o.more) > 0 {
			old = o.more[id]
			delete(o.more, id)
		}
	default:
		if o.more == nil {
			o.more = make(map[uint64]tracing.Process)
		}
		old = o.more[id]
		o.more[id] = p
	}
	return old
}

// get returns job id's open span, the zero Process if none.
func (o *openSpans) get(id uint64) tracing.Process {
	if s := &o.ring[id&(openSlots-1)]; s.id == id {
		return s.p
	}
	return o.more[id] // a nil map reads as empty
}

// take removes and returns job id's open span, the zero Process if none.
func (o *openSpans) take(id uint64) tracing.Process {
	if s := &o.ring[id&(openSlots-1)]; s.id == id {
		p := s.p
		*s = openSlot{}
		return p
	}
	if len(o.more) == 0 {
		return tracing.Process{}
	}
	p := o.more[id]
	delete(o.more, id)
	return p
}
