package beanstalk

import "time"

// Observer receives the job lifecycle events a metrics layer counts. The
// engine calls it with its lock held, so every method must be quick (an
// atomic add, a histogram observation), must not block and must not call
// into the engine. tube is valid only for the call.
//
// The interface lives here, not in package metrics, so the engine stays
// free of metric types; proxy adapts it to jobgate's metrics.
type Observer interface {
	// JobPut is a job accepted by put (after its record is durable, with
	// a journal). Jobs restored from a journal are not reported.
	JobPut(tube string)
	// JobReserved is a job handed out by reserve or reserve-job, after
	// waiting wait: the time since its put, less the delay of its last
	// put or release. For a job reserved before (and released or timed
	// out) this still counts from the put, since the 96-byte job keeps no
	// ready time; it is exact for the first reservation, the usual case.
	JobReserved(tube string, wait time.Duration)
	// JobDeleted is a reserved job deleted by its reserver (completed),
	// after running run: the time since its reservation or its last
	// touch, derived from the TTR deadline.
	JobDeleted(tube string, run time.Duration)
	// JobBuried is a reserved job buried by its reserver (failed), with
	// run as for JobDeleted.
	JobBuried(tube string, run time.Duration)
}

// SetObserver makes o (nil: none) receive the engine's job events from
// now on. One observer per engine: a later call replaces it.
func (e *Engine) SetObserver(o Observer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.obs = o
}

// runTime is how long reserved job j has run at now: its TTR deadline was
// set to reservation (or touch) time + ttr.
func runTime(j *job, now int64) time.Duration {
	return time.Duration(max(now-(j.deadline-int64(j.ttr)*int64(time.Second)), 0))
}

// QueueDepths calls emit once per tube with its number of ready, reserved,
// delayed and buried jobs. It copies the counts under the lock and calls
// emit after releasing it, so a slow caller does not hold up the engine.
func (e *Engine) QueueDepths(emit func(tube string, ready, reserved, delayed, buried int)) {
	type depth struct {
		name                             string
		ready, reserved, delayed, buried int
	}
	e.mu.Lock()
	ds := make([]depth, 0, len(e.tubeList))
	for _, t := range e.tubeList {
		ds = append(ds, depth{t.name, t.ready.len(), int(t.reserved), t.delay.len(), t.buried.len()})
	}
	e.mu.Unlock()
	for _, d := range ds {
		emit(d.name, d.ready, d.reserved, d.delayed, d.buried)
	}
}
