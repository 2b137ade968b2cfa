package proxy

import "github.com/jobgate/jobgate/tracing"

// Reservations undone before their span opened. The engine notes a traced
// job's trace at its reservation, under its lock, and the reserving
// connection opens the process span after the RESERVED reply (reserved),
// without that lock. In between, the job's TTR may run out (or its
// session close) and another connection may reserve it, even delete it:
// the engine's hook then finds no span to end, and the span the first
// connection opened afterwards stayed open for ever, its id in bt.open
// (ids are never reused). The engine now marks the session's reservation
// undone before it calls the hook (Session.ReservedUndone), and reserved
// reads the mark under mu, where the hook looks for the span: one of them
// sees the other, and the span ends once. A mark per session, overwritten
// by its next reservation, keeps this bounded without a table.

// returned handles the engine's undoing of reservation number reserves of
// job id: it ends that reservation's span if open. Not open, its
// connection has not opened it yet (and will see the session's mark), or
// the job's open span is an earlier reservation's whose outcome its own
// connection has still to report (a release whose reply is not yet
// handled). It runs under the engine lock.
func (bt *beanstalkTrace) returned(id uint64, reserves int, timedOut bool) {
	bt.mu.Lock()
	o, ok := bt.open[id]
	if !ok || o.reserves != reserves {
		bt.mu.Unlock()
		return
	}
	delete(bt.open, id)
	bt.mu.Unlock()
	endUndone(o.p, timedOut)
}

// endUndone ends process span p of a reservation the engine undid.
func endUndone(p tracing.Process, timedOut bool) {
	if timedOut {
		p.TTRExpired()
	} else {
		p.Fail(tracing.ErrorWorkerLost)
	}
}
