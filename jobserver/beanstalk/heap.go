package beanstalk

// jobHeap is a binary min-heap of jobs that records each job's position in
// job.idx, so a job can be removed from the middle in O(log n) (delete,
// kick-job, reserve-job, touch). A job is in at most one heap at a time, so
// one index field serves all of them.
//
// The ready heap orders by (pri, id); every other heap by (deadline, id):
// delayed jobs by the time they become ready, reserved jobs by their TTR
// deadline, buried jobs by their burial sequence number (FIFO).
type jobHeap struct {
	a     []*job
	byPri bool
}

func (h *jobHeap) len() int { return len(h.a) }

// top returns the least job, or nil.
func (h *jobHeap) top() *job {
	if len(h.a) == 0 {
		return nil
	}
	return h.a[0]
}

func (h *jobHeap) less(x, y *job) bool {
	if h.byPri {
		if x.pri != y.pri {
			return x.pri < y.pri
		}
		return x.id < y.id
	}
	if x.deadline != y.deadline {
		return x.deadline < y.deadline
	}
	return x.id < y.id
}

// contains reports whether j sits in this heap; it is how ownership of a
// reservation is checked without a back pointer in every job.
func (h *jobHeap) contains(j *job) bool {
	return int(j.idx) < len(h.a) && h.a[j.idx] == j
}

func (h *jobHeap) push(j *job) {
	j.idx = int32(len(h.a))
	h.a = append(h.a, j)
	h.up(len(h.a) - 1)
}

// remove takes j out of the heap.
func (h *jobHeap) remove(j *job) {
	i := int(j.idx)
	n := len(h.a) - 1
	if i != n {
		h.swap(i, n)
	}
	h.a[n] = nil
	h.a = h.a[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	j.idx = -1
	h.shrink()
}

// fix restores the order after j's key changed.
func (h *jobHeap) fix(j *job) {
	i := int(j.idx)
	if !h.down(i) {
		h.up(i)
	}
}

// shrink gives memory back after a large queue drains, so a burst of a
// million jobs does not pin its peak footprint forever.
func (h *jobHeap) shrink() {
	if c := cap(h.a); c > 1024 && len(h.a) < c/4 {
		a := make([]*job, len(h.a), c/2)
		copy(a, h.a)
		h.a = a
	}
}

func (h *jobHeap) swap(i, j int) {
	h.a[i], h.a[j] = h.a[j], h.a[i]
	h.a[i].idx = int32(i)
	h.a[j].idx = int32(j)
}

func (h *jobHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.a[i], h.a[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts i down and reports whether it moved.
func (h *jobHeap) down(i0 int) bool {
	i, n := i0, len(h.a)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(h.a[r], h.a[l]) {
			m = r
		}
		if !h.less(h.a[m], h.a[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > i0
}

// timed is what the engine's timer heap holds: tubes (delays, pauses) and
// sessions (TTR, DEADLINE_SOON, reserve timeouts). at is the key; the item
// keeps its own position so it can be moved or removed.
type timed interface {
	at() int64
	heapIndex() *int
}

// timerHeap is a min-heap of timed items by at(). Indexes are -1 when the
// item is not in the heap.
type timerHeap[T timed] struct{ a []T }

func (h *timerHeap[T]) top() (T, bool) {
	var zero T
	if len(h.a) == 0 {
		return zero, false
	}
	return h.a[0], true
}

// set puts x in the heap or moves it after its key changed.
func (h *timerHeap[T]) set(x T) {
	p := x.heapIndex()
	if *p < 0 {
		*p = len(h.a)
		h.a = append(h.a, x)
		h.up(*p)
		return
	}
	if !h.down(*p) {
		h.up(*p)
	}
}

// remove takes x out of the heap if it is there.
func (h *timerHeap[T]) remove(x T) {
	p := x.heapIndex()
	i := *p
	if i < 0 {
		return
	}
	n := len(h.a) - 1
	if i != n {
		h.swap(i, n)
	}
	var zero T
	h.a[n] = zero
	h.a = h.a[:n]
	if i != n && !h.down(i) {
		h.up(i)
	}
	*p = -1
}

func (h *timerHeap[T]) swap(i, j int) {
	h.a[i], h.a[j] = h.a[j], h.a[i]
	*h.a[i].heapIndex() = i
	*h.a[j].heapIndex() = j
}

func (h *timerHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h.a[i].at() >= h.a[p].at() {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timerHeap[T]) down(i0 int) bool {
	i, n := i0, len(h.a)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.a[r].at() < h.a[l].at() {
			m = r
		}
		if h.a[m].at() >= h.a[i].at() {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > i0
}
