package beanstalk

// The traces of traced jobs live next to the jobs, not only in a Go map: a
// traced put used to allocate a jobTrace and insert it into a map keyed by
// id, whose inserts missed the cache (up to 1 µs a job in the profiles,
// docs/BENCHMARKS.md, round 12 under Tracing). A page being filled that was
// given traceSlotsAt traced jobs, or any when a spare trace page is kept,
// gets an array of trace slots, by the same index as its jobs; a traced
// job's slot is found by the page lookup the table makes anyway. Other
// pages keep their traces in the table's map, so that sampling a few jobs
// in a thousand does not cost every job of their pages a slot (40 bytes).
// When the next page starts, a page holding fewer than traceSlotsAt traced
// jobs moves them back to the map and gives its slots back (a cycle traces
// many jobs, few at a time); one holding more keeps them until fewer than
// half as many are left. So slots cost the page being filled and the spare
// (40 KiB each), and 40 KiB for at least traceSlotsAt/2 traced jobs on any
// other page. Untraced jobs pay nothing (the job's traced flag sits in the
// struct's padding), and an engine that never traces never allocates.

// traceSlotsAt is the number of traced jobs given to a page at which it
// moves their traces from the map into slots of its own: one in 16 of its
// jobs, where the map's cost per traced job (about 80 bytes with the
// allocation) comes to an eighth of the slots' and the map's inserts stop
// paying.
const traceSlotsAt = pageSize / 16

// tracePage holds the traces of a page's jobs, by the same index.
type tracePage [pageSize]jobTrace

// traceOf returns j's trace, or nil when j is untraced.
func (t *jobTable) traceOf(j *job) *jobTrace {
	if !j.traced {
		return nil
	}
	if p := t.pages[j.id>>pageBits]; p != nil && p.traces != nil && p.jobs[j.id&pageMask] == j {
		return &p.traces[j.id&pageMask]
	}
	return t.traceMap[j.id]
}

// setTrace makes j, which is in the table, traced with creation c.
func (t *jobTable) setTrace(j *job, c Creation) {
	j.traced = true
	p := t.pages[j.id>>pageBits]
	if p == nil || p.jobs[j.id&pageMask] != j {
		// A job restored into a page already gone sparse: rare.
		t.mapTrace(j.id, jobTrace{creation: c})
		return
	}
	p.traced++
	p.tracedAdded++
	if p.traces != nil {
		p.traces[j.id&pageMask] = jobTrace{creation: c}
		return
	}
	// The count of traced jobs ever added, not of those left, says how
	// densely the page is traced: a cycle of puts and deletes keeps a few
	// jobs at a time, every one of them traced, and each took the map's
	// way (an allocation, an insert and a delete; 0.1-0.2 µs a job),
	// docs/BENCHMARKS.md, round 15 under Tracing. The spare page is held
	// only while this page is filled: issueTraces gives it back then
	// unless the page keeps traceSlotsAt traced jobs.
	if p.tracedAdded < traceSlotsAt && t.spareTraces == nil {
		t.mapTrace(j.id, jobTrace{creation: c})
		return
	}
	// The page is densely traced: its traces move to slots.
	p.traces = t.takeTracePage()
	p.traces[j.id&pageMask] = jobTrace{creation: c}
	for i, pj := range p.jobs {
		if pj != nil && pj.traced && pj != j {
			p.traces[i] = *t.traceMap[pj.id]
			delete(t.traceMap, pj.id)
		}
	}
}

// mapTrace keeps tr for job id in the map.
func (t *jobTable) mapTrace(id uint64, tr jobTrace) {
	if t.traceMap == nil {
		t.traceMap = make(map[uint64]*jobTrace)
	}
	t.traceMap[id] = &tr
}

// clearTrace forgets j's trace; j is still in the table.
func (t *jobTable) clearTrace(j *job) {
	if !j.traced {
		return
	}
	j.traced = false
	n := j.id >> pageBits
	p := t.pages[n]
	if p == nil || p.jobs[j.id&pageMask] != j {
		delete(t.traceMap, j.id)
		return
	}
	p.traced--
	if p.traces == nil {
		delete(t.traceMap, j.id)
		return
	}
	p.traces[j.id&pageMask] = jobTrace{}
	// A page still being filled keeps its slots for the traced jobs to
	// come; an issued one gives them back once its traced jobs are few,
	// half as many as it took them for, so that it does not flap.
	if p.traced < traceSlotsAt/2 && n < t.maxID>>pageBits {
		t.overflowTraces(p)
	}
}

// issueTraces is called when page n is no longer filled, a new page having
// started: its slots go back to the map's way, and to the spare, unless it
// holds traceSlotsAt traced jobs. A page given many traced jobs but few at
// a time, as by a traced cycle next to an untraced backlog or one that
// buries one job in 20, would else keep 40 KiB for none or a few.
func (t *jobTable) issueTraces(n uint64) {
	if p := t.pages[n]; p != nil && p.traces != nil && p.traced < traceSlotsAt {
		t.overflowTraces(p)
	}
}

// takeTracePage returns an all-zero trace page: the spare one if any.
func (t *jobTable) takeTracePage() *tracePage {
	if tp := t.spareTraces; tp != nil {
		t.spareTraces = nil
		return tp
	}
	return new(tracePage)
}

// keepTracePage keeps tp, all zero (every slot is cleared with its job),
// for the next page that needs one: a fresh 40 KiB page is zeroed and, its
// memory often just returned to the kernel, faulted in again (0.1 µs a job
// in the profile).
func (t *jobTable) keepTracePage(tp *tracePage) {
	if t.spareTraces == nil {
		t.spareTraces = tp
	}
}

// overflowTraces moves the traces of page p to the map and gives back its
// slots: p is going away (its jobs move to the overflow map) or keeps few
// traced jobs.
func (t *jobTable) overflowTraces(p *jobPage) {
	if p.traces == nil {
		return // its traces, if any, are in the map already
	}
	for i, j := range p.jobs {
		if j != nil && j.traced {
			t.mapTrace(j.id, p.traces[i])
		}
	}
	*p.traces = tracePage{}
	t.keepTracePage(p.traces)
	p.traces = nil
}
