package tracing

import (
	"sync"
	"sync/atomic"
	"time"
)

// Entry is what the proxy keeps about a job between its events when no
// engine keeps it: for jobs on upstream gearmand/beanstalkd, which store no
// creation context.
type Entry struct {
	// Creation is the job's creation context from [Send.Creation].
	Creation Creation
	// Enqueued is when the job last became ready: submitted, put, or
	// released (plus its delay). Pass it as Message.Enqueued.
	Enqueued time.Time
	// Attempts counts deliveries so far; the proxy increments it at each
	// assignment and passes it as Message.Attempt.
	Attempts int
	// Process is the open process span while a worker holds the job, zero
	// otherwise.
	Process Process
	// Name is the job's tube or function, for proxies whose delivery does
	// not carry it (a Beanstalk RESERVED reply); empty otherwise.
	Name string
	// Timeout is how long the server lets one delivery of the job run
	// before taking it back (a Beanstalk job's TTR); zero when it is not
	// known or not the job's own (Gearman's is the worker's).
	Timeout time.Duration
	// Deadline, when not nil, is the timer the proxy armed to end Process
	// when the server's time limit for the delivery runs out. Whoever
	// clears or replaces Process stops it; the Table does when it evicts
	// or replaces the entry ([Table.Put]) or ends its span ([Table.EndOpen]).
	Deadline interface{ Stop() bool }
	// Unique is the Gearman unique id the job was submitted with; "" if
	// none or not Gearman. A later submit that got the same handle with
	// the same unique id was coalesced onto the job (see Put).
	Unique string
}

// StopDeadline stops e's deadline timer, if any: call it wherever
// Process is cleared or replaced.
func (e *Entry) StopDeadline() {
	if e.Deadline != nil {
		e.Deadline.Stop()
		e.Deadline = nil
	}
}

// Table is a size-capped map from a job's client-visible id or handle to
// its [Entry], evicting the least recently used entry when full. Jobs whose
// outcome the proxy never sees (a client that disconnects, a job deleted
// by another gateway instance) would otherwise make it grow forever.
// Evicting an entry with an open process span ends that span with error.type
// "evicted", so it is exported rather than lost. Safe for concurrent use;
// every operation is O(1) under one mutex.
type Table[K comparable] struct {
	mu    sync.Mutex
	max   int
	items map[K]*tableNode[K]
	// root is the sentinel of a circular list: root.next is the most
	// recently used node, root.prev the least.
	root    tableNode[K]
	evicted atomic.Uint64
}

// tableNode is one entry in the table's recency list. The list is
// intrusive, rather than container/list, so a node is one allocation and
// its value needs no interface boxing.
type tableNode[K comparable] struct {
	key        K
	entry      Entry
	prev, next *tableNode[K]
}

// NewTable returns a Table holding at most size entries (at least 1).
func NewTable[K comparable](size int) *Table[K] {
	size = max(size, 1)
	t := &Table[K]{max: size, items: make(map[K]*tableNode[K], min(size, 1024))}
	t.root.next, t.root.prev = &t.root, &t.root
	return t
}

func (t *Table[K]) unlink(n *tableNode[K]) {
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
}

func (t *Table[K]) pushFront(n *tableNode[K]) {
	n.prev, n.next = &t.root, t.root.next
	t.root.next.prev = n
	t.root.next = n
}

// Put stores e under key and evicts the least recently used entry if the
// table is over its cap. An entry already there is kept as it is, unless e
// brings a process span of its own, when
//   - its process span is open: a worker holds that job (a Gearman submit
//     coalesced onto a running job gets its handle), and the worker's
//     outcome or the deadline must find the span, its Deadline, Attempts
//     and Creation to end it in the job's trace;
//   - it has e's Unique (not ""): gearmand coalesced e's submit onto the
//     queued job, which stays in the trace of the submit that created it.
//
// Any other entry (one left by a job whose end the proxy did not see,
// whose handle a restarted server gave again) is replaced; its deadline is
// stopped, and an open span replaced by e's is ended as evicted rather
// than lost.
func (t *Table[K]) Put(key K, e Entry) {
	var victim Process
	t.mu.Lock()
	if n, ok := t.items[key]; ok {
		coalesced := n.entry.Process.IsOpen() || (e.Unique != "" && n.entry.Unique == e.Unique)
		if !coalesced || e.Process.IsOpen() {
			victim = n.entry.Process
			n.entry.StopDeadline()
			n.entry = e
		}
		t.unlink(n)
		t.pushFront(n)
		t.mu.Unlock()
		victim.evict()
		return
	}
	victim = t.insertLocked(key, e)
	t.mu.Unlock()
	// Ending a span runs the span processors; not under our lock.
	victim.evict()
}

// insertLocked adds a new entry under key, which has none, and evicts the
// least recently used entry if the table is over its cap, returning that
// entry's process span for the caller to end once t.mu is released.
func (t *Table[K]) insertLocked(key K, e Entry) Process {
	n := &tableNode[K]{key: key, entry: e}
	t.items[key] = n
	t.pushFront(n)
	if len(t.items) <= t.max {
		return Process{}
	}
	old := t.root.prev
	t.unlink(old)
	delete(t.items, old.key)
	old.entry.StopDeadline()
	t.evicted.Add(1)
	return old.entry.Process
}

// Get returns the entry under key and marks it recently used.
func (t *Table[K]) Get(key K) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.items[key]
	if !ok {
		return Entry{}, false
	}
	t.unlink(n)
	t.pushFront(n)
	return n.entry, true
}

// Update calls fn with the entry under key, if there is one, while holding
// the table's lock, marks it recently used and reports whether it was
// found. fn must be short and must not call the Table; it is how an
// assignment increments Attempts and stores Process in one step.
func (t *Table[K]) Update(key K, fn func(*Entry)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.items[key]
	if !ok {
		return false
	}
	fn(&n.entry)
	t.unlink(n)
	t.pushFront(n)
	return true
}

// Delete removes and returns the entry under key: at the job's final
// outcome (WORK_COMPLETE/FAIL/EXCEPTION, delete), after which the caller
// ends its Process.
func (t *Table[K]) Delete(key K) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.items[key]
	if !ok {
		return Entry{}, false
	}
	t.unlink(n)
	delete(t.items, key)
	return n.entry, true
}

// EndOpen ends every open process span in the table as failed with
// error.type errType and clears it from its entry, returning how many it
// ended. Call it at shutdown, before [Provider.Shutdown], so jobs that
// workers hold at that moment are exported rather than lost.
func (t *Table[K]) EndOpen(errType string) int {
	var open []Process
	t.mu.Lock()
	for n := t.root.next; n != &t.root; n = n.next {
		if n.entry.Process.IsOpen() {
			open = append(open, n.entry.Process)
			n.entry.Process = Process{}
		}
		n.entry.StopDeadline()
	}
	t.mu.Unlock()
	for _, p := range open {
		p.Fail(errType)
	}
	return len(open)
}

// Len returns the number of entries.
func (t *Table[K]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.items)
}

// Evicted returns how many entries were evicted because the table was full.
// It only grows; export it as a counter metric. A rising value means the
// cap is too small for the number of jobs in flight, or outcomes are being
// missed.
func (t *Table[K]) Evicted() uint64 { return t.evicted.Load() }
