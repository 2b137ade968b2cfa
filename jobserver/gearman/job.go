package gearman

import (
	"unsafe"
)

// Priorities, in the order workers are served.
const (
	prioHigh = iota
	prioNormal
	prioLow
	numPrio
)

// jobState is where a job is.
type jobState uint8

const (
	stateQueued  jobState = iota // in its function's ready queue
	stateDelayed                 // in the timer heap until its epoch/scheduled time
	stateRunning                 // held by a worker
	statePending                 // journaled, waiting for its record to be durable (held.go)
	stateGone                    // finished, failed, dropped or cancelled
)

// job is one Gearman job. It is kept small: a queued background job costs
// this struct, its buf and one map entry.
type job struct {
	id  uint64    // handle counter: the handle is prefix:id
	fn  *function // owning function
	buf []byte    // unique id followed by the workload; never modified
	// at is, while delayed or running, the deadline in unix ns (when the
	// job becomes ready, or when its worker's CAN_DO_TIMEOUT expires; 0:
	// none); while pending, when it is to become ready (0: now); while
	// queued, the enqueue sequence number that orders jobs of one priority
	// across functions.
	at        int64
	prev      *job     // ready queue, pending list or worker's running list links
	next      *job     // (a job is in at most one of them)
	worker    *Session // while running
	clients   *attach  // foreground clients, newest first
	ext       *jobExt  // a traced job's trace, a reduce job's reducer (trace.go); nil for most jobs
	num, den  uint32   // last WORK_STATUS
	tidx      int32    // index in the timer heap, -1 when absent
	ulen      uint8    // length of the unique id at the start of buf
	prio      uint8    // prioHigh, prioNormal or prioLow
	state     jobState //
	retries   uint8    // failed runs so far
	bg        bool     // background: no client waits for it
	cancelled bool     // admin "cancel job" while running: drop on requeue
	uniqKey   bool     // registered in fn.uniq or fn.duniq
	dataKey   bool     // the unique key is the workload (unique "-")
	journaled bool     // the journal holds a Full record and no Delete of it
}

// unique returns the job's unique id.
func (j *job) unique() []byte { return j.buf[:j.ulen] }

// data returns the job's workload.
func (j *job) data() []byte { return j.buf[j.ulen:] }

// key returns the job's coalescing key as a string that shares buf's
// memory: buf is never modified, so the string stays valid.
func (j *job) key() string {
	b := j.unique()
	if j.dataKey {
		b = j.data()
	}
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// jobList is a FIFO of jobs linked through prev/next.
type jobList struct{ head, tail *job }

func (l *jobList) push(j *job) {
	j.prev, j.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = j
	} else {
		l.head = j
	}
	l.tail = j
}

func (l *jobList) remove(j *job) {
	if j.prev != nil {
		j.prev.next = j.next
	} else {
		l.head = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	} else {
		l.tail = j.prev
	}
	j.prev, j.next = nil, nil
}

// function is one Gearman function: its queues and capable workers.
type function struct {
	name     string
	queue    [numPrio]jobList
	queued   [numPrio]int // jobs in each ready queue
	delayed  int          // jobs waiting for their time (normal priority)
	pending  int          // jobs waiting for their journal record
	running  int          // jobs held by workers
	maxQueue [numPrio]int // 0: unlimited
	workers  []*Session   // sessions that registered the function
	wake     int          // round-robin position in workers for wakeups
	sleepers int          // workers that are wakeable (see Session.wakeable)
	uniq     map[string]*job
	// duniq holds the jobs submitted with unique "-", by workload; uniq
	// the others, by unique id (see index).
	duniq map[string]*job
}

// index returns the coalescing index j belongs in: gearmand compares a
// job's unique id with a unique id, and a "-" submission's workload with
// the workloads of the jobs it finds, so the two kinds are kept apart.
func (f *function) index(j *job) *map[string]*job {
	if j.dataKey {
		return &f.duniq
	}
	return &f.uniq
}

// addUnique registers j in its coalescing index unless another job holds
// its key, and reports whether it did.
func (f *function) addUnique(j *job) bool {
	k := j.key()
	if k == "" {
		return false
	}
	m := f.index(j)
	if *m == nil {
		*m = make(map[string]*job)
	}
	if (*m)[k] != nil {
		return false
	}
	(*m)[k] = j
	j.uniqKey = true
	return true
}

// findUnique returns the job a submission with this unique id and workload
// coalesces with, as gearmand finds it: a unique id matches a job with
// that unique id; "-" matches a job whose workload is the same and whose
// unique id is "-" or that workload (the newer if both).
func (f *function) findUnique(unique, data []byte) *job {
	if len(unique) != 1 || unique[0] != '-' {
		if len(unique) == 0 {
			return nil
		}
		return f.uniq[string(unique)]
	}
	if len(data) == 0 {
		return nil
	}
	j := f.duniq[string(data)]
	if k := f.uniq[string(data)]; k != nil && string(k.data()) == string(data) && (j == nil || k.id > j.id) {
		j = k
	}
	return j
}

// total is gearmand's job_total: every live job of the function.
func (f *function) total() int {
	return f.queued[0] + f.queued[1] + f.queued[2] + f.delayed + f.pending + f.running
}

// hasReady reports whether a worker could grab a job of f now.
func (f *function) hasReady() bool {
	return f.queue[0].head != nil || f.queue[1].head != nil || f.queue[2].head != nil
}

// attach links a foreground client session to a job it waits for.
type attach struct {
	s            *Session
	j            *job
	jnext        *attach // next client of the same job
	sprev, snext *attach // the session's attachments
}

// timerHeap is a min-heap of jobs by at, each knowing its index.
type timerHeap []*job

func (h timerHeap) less(a, b int) bool { return h[a].at < h[b].at }

func (h timerHeap) swap(a, b int) {
	h[a], h[b] = h[b], h[a]
	h[a].tidx = int32(a)
	h[b].tidx = int32(b)
}

func (h *timerHeap) push(j *job) {
	j.tidx = int32(len(*h))
	*h = append(*h, j)
	h.up(len(*h) - 1)
}

func (h *timerHeap) remove(j *job) {
	i := int(j.tidx)
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	j.tidx = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) bool {
	start := i
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

// unsafeBytes views an immutable string as bytes for Output calls, which
// only read their arguments.
func unsafeBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
