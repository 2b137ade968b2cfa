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
	e, lost := bt.ending[id]
	delete(bt.ending, id)
	bt.mu.Unlock()
	endUndone(o.p, timedOut)
	if lost {
		e.p.Fail(tracing.ErrorWorkerLost) // see supersedeLocked
	}
}

// endUndone ends process span p of a reservation the engine undid.
func endUndone(p tracing.Process, timedOut bool) {
	if timedOut {
		p.TTRExpired()
	} else {
		p.Fail(tracing.ErrorWorkerLost)
	}
}

// supersedeLocked makes room in bt.open for a new reservation of job id
// and returns the span to end as lost, if any. A span still open there is
// a previous reservation's whose end the engine's hook would have
// reported already, so its own connection has it to report: a release or
// bury whose reply that connection has not handled yet, while the job went
// at once to the new reservation's waiting connection. It waits in
// bt.ending, one a job, for that connection's take; a second one, or one
// still waiting when the new span ends (take, returned), ends as lost,
// which keeps bt.ending no larger than bt.open.
func (bt *beanstalkTrace) supersedeLocked(id uint64) (lost openProcess) {
	old, ok := bt.open[id]
	if !ok {
		return openProcess{}
	}
	if _, busy := bt.ending[id]; busy {
		return old
	}
	bt.ending[id] = old
	return openProcess{}
}
