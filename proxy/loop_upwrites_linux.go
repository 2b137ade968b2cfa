package proxy

import "github.com/jobgate/jobgate/routing"

// upWrites are the upstream sessions an event loop's batch gave requests
// (a gateway connection's flush on the loop), for the batch's writes to
// send with the replies to the clients: one system call for all. Owned by
// the loop goroutine.
type upWrites struct {
	list []routing.LoopSession // given requests since the last queue
	out  []routing.LoopSession // queued in the batch running, for done
}

// add lists u; listing it twice is harmless.
func (w *upWrites) add(u routing.LoopSession) { w.list = append(w.list, u) }

// pending reports whether sessions are listed.
func (w *upWrites) pending() bool { return len(w.list) > 0 }

// queue queues in b a write for each listed session that has one to make
// (WriteInto) and empties the list; once b has run, done finishes them.
func (w *upWrites) queue(b routing.IOBatch) {
	for i, u := range w.list {
		if u.WriteInto(b) { // false for one listed twice, or ended
			w.out = append(w.out, u)
		}
		w.list[i] = nil
	}
	w.list = w.list[:0]
}

// done takes the results of the writes queue queued (Wrote). A session
// that fails reports it to its client, which may list sessions again.
func (w *upWrites) done() {
	for i, u := range w.out {
		u.Wrote()
		w.out[i] = nil
	}
	w.out = w.out[:0]
}
