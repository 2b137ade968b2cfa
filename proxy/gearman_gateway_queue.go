package proxy

// replyQueue is a first-in, first-out list of replies that keeps its
// array: taking from the front advances a head index, and the room in
// front of it is reused once the queue empties, or moved into when the
// array is full and at least half of it is behind the head. A session's
// request order (gwSession.fifo) and each backend's sent requests
// (gwBackend.pending) are such lists; with requests pipelined, the plain
// slice they were re-sliced from the front and reallocated every few
// dozen replies.
type replyQueue struct {
	items []*gwReply
	head  int
}

// len returns how many replies are queued.
func (q *replyQueue) len() int { return len(q.items) - q.head }

// all returns the queued replies, oldest first; valid until the next
// change.
func (q *replyQueue) all() []*gwReply { return q.items[q.head:] }

// front returns the oldest reply; the queue must not be empty.
func (q *replyQueue) front() *gwReply { return q.items[q.head] }

// push appends r.
func (q *replyQueue) push(r *gwReply) {
	if q.head > 0 && len(q.items) == cap(q.items) && 2*q.head >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, r)
}

// pop removes and returns the oldest reply; the queue must not be empty.
func (q *replyQueue) pop() *gwReply {
	r := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return r
}

// remove takes r out wherever it is; false if it is not queued.
func (q *replyQueue) remove(r *gwReply) bool {
	for i := q.head; i < len(q.items); i++ {
		if q.items[i] == r {
			copy(q.items[i:], q.items[i+1:])
			q.items[len(q.items)-1] = nil
			q.items = q.items[:len(q.items)-1]
			if q.head == len(q.items) {
				q.items, q.head = q.items[:0], 0
			}
			return true
		}
	}
	return false
}

// reset empties the queue and lets its array go.
func (q *replyQueue) reset() { q.items, q.head = nil, 0 }
