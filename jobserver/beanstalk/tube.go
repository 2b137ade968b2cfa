package beanstalk

import "math"

// tube is a named queue: a ready heap, a delay heap, a buried FIFO and the
// sessions waiting to reserve from it. Tubes are created when first
// referenced and freed when nothing refers to them (no job in any state, no
// session using or watching it), as in beanstalkd. Every field is guarded
// by Engine.mu.
type tube struct {
	name  string
	nameB []byte // name as bytes, for replies without a conversion

	// refs counts the jobs in the tube (every state) plus the sessions
	// using it plus the sessions watching it; "default" holds one more so
	// it never goes away.
	refs    int
	listIdx int // position in Engine.tubeList

	ready  jobHeap // by (pri, id)
	delay  jobHeap // by (deadline, id)
	buried jobHeap // by burial sequence

	waiters waitList

	paused    bool
	pause     int64 // length of the current pause, ns
	unpauseAt int64 // engine ns

	// timerIdx and nextAt place the tube in the engine's timer heap while
	// it has a delayed job or a pause to end.
	timerIdx int
	nextAt   int64

	urgent    uint64 // ready jobs with pri < urgentThreshold
	reserved  uint64
	totalJobs uint64
	deletes   uint64 // successful deletes, beanstalkd's per-tube cmd-delete
	pauses    uint64
	using     int
	watching  int
}

func (t *tube) at() int64        { return t.nextAt }
func (t *tube) heapIndex() *int  { return &t.timerIdx }
func (t *tube) hasWaiters() bool { return t.waiters.len() > 0 }

// pausedAt reports whether the tube is still paused at now. The timer ends
// pauses on time; this check only closes the gap of a late timer.
func (t *tube) pausedAt(now int64) bool {
	return t.paused && t.unpauseAt > now
}

// tubeLocked returns the tube named name, creating it. The caller takes a
// reference right away (a session's use or watch, or a job).
func (e *Engine) tubeLocked(name []byte) *tube {
	if t := e.tubes[string(name)]; t != nil {
		return t
	}
	t := &tube{
		name:     string(name),
		nameB:    append([]byte(nil), name...),
		listIdx:  len(e.tubeList),
		timerIdx: -1,
		ready:    jobHeap{byPri: true},
	}
	e.tubes[t.name] = t
	e.tubeList = append(e.tubeList, t)
	return t
}

func (e *Engine) refLocked(t *tube) { t.refs++ }

// unrefLocked drops a reference and frees the tube when it was the last.
// The global list loses the tube by moving its last entry into the hole,
// which is the order beanstalkd's list-tubes shows.
func (e *Engine) unrefLocked(t *tube) {
	t.refs--
	if t.refs > 0 {
		return
	}
	delete(e.tubes, t.name)
	last := len(e.tubeList) - 1
	moved := e.tubeList[last]
	e.tubeList[t.listIdx] = moved
	moved.listIdx = t.listIdx
	e.tubeList[last] = nil
	e.tubeList = e.tubeList[:last]
	e.tubeTimers.remove(t)
}

// retimeTubeLocked recomputes when the tube next needs the timer (its first
// delayed job or the end of its pause) and moves it in the timer heap.
func (e *Engine) retimeTubeLocked(t *tube) {
	next := int64(math.MaxInt64)
	if j := t.delay.top(); j != nil {
		next = j.deadline
	}
	if t.paused && t.unpauseAt < next {
		next = t.unpauseAt
	}
	if next == math.MaxInt64 {
		e.tubeTimers.remove(t)
		return
	}
	if t.timerIdx >= 0 && t.nextAt == next {
		return
	}
	t.nextAt = next
	e.tubeTimers.set(t)
	e.armLocked(next)
}

// waiter puts a waiting session in one watched tube's set. A session
// owns one waiter per watched tube, reused across reserves.
type waiter struct {
	s   *Session
	idx int // position in the tube's waitList.items
}

// waitList is a tube's set of waiting sessions, kept as beanstalkd keeps
// it (ms.c), because which waiter gets a new job is visible to clients and
// the differential test holds us to it: an array where a removal moves the
// last element into the freed slot, and a cursor that picks the waiter a
// job goes to and moves one slot on after each pick. That is mostly, not
// always, the longest waiter.
type waitList struct {
	items []*waiter
	last  int // the cursor: where the next pick looks, modulo len(items)
}

// len is how many sessions wait.
func (l *waitList) len() int { return len(l.items) }

func (l *waitList) pushBack(w *waiter) {
	w.idx = len(l.items)
	l.items = append(l.items, w)
}

func (l *waitList) remove(w *waiter) {
	end := len(l.items) - 1
	moved := l.items[end]
	l.items[w.idx] = moved
	moved.idx = w.idx
	l.items[end] = nil
	l.items = l.items[:end]
}

// pick returns the waiter the next job goes to, which the caller then
// removes (Session.stopWaitingLocked), and moves the cursor on. The list
// must not be empty.
func (l *waitList) pick() *waiter {
	l.last %= len(l.items)
	w := l.items[l.last]
	l.last++
	return w
}
