package beanstalk

// The traces of traced jobs live in the job table's pages, next to the
// jobs, not in a Go map: a traced put used to allocate a jobTrace and
// insert it into a map keyed by id, whose inserts missed the cache (up to
// 1 µs a job in the profiles, docs/BENCHMARKS.md, round 12 under
// Tracing). A page gets an array of trace slots at its first traced job
// and keeps it while it holds traced jobs; untraced jobs pay nothing (the
// job's traced flag sits in the struct's padding), and an engine that
// never traces never allocates one. A traced job's slot is found by the
// page lookup the table makes anyway.

// tracePage holds the traces of a page's jobs, by the same index.
type tracePage [pageSize]jobTrace

// traceOf returns j's trace, or nil when j is untraced.
func (t *jobTable) traceOf(j *job) *jobTrace {
	if !j.traced {
		return nil
	}
	if p := t.pages[j.id>>pageBits]; p != nil && p.jobs[j.id&pageMask] == j {
		return &p.traces[j.id&pageMask]
	}
	return t.traceOverflow[j.id]
}

// setTrace makes j, which is in the table, traced with creation c.
func (t *jobTable) setTrace(j *job, c Creation) {
	p := t.pages[j.id>>pageBits]
	if p == nil || p.jobs[j.id&pageMask] != j {
		// Only a job restored into a page already gone sparse: rare.
		if t.traceOverflow == nil {
			t.traceOverflow = make(map[uint64]*jobTrace)
		}
		t.traceOverflow[j.id] = &jobTrace{creation: c}
		j.traced = true
		return
	}
	if p.traces == nil {
		p.traces = t.takeTracePage()
	}
	p.traces[j.id&pageMask] = jobTrace{creation: c}
	p.traced++
	j.traced = true
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
		delete(t.traceOverflow, j.id)
		return
	}
	p.traces[j.id&pageMask] = jobTrace{}
	p.traced--
	// A page still being filled keeps its slots for the traced jobs to
	// come; an issued one gives them back with its last traced job.
	if p.traced == 0 && n < t.maxID>>pageBits {
		t.keepTracePage(p.traces)
		p.traces = nil
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

// overflowTraces moves the traces of page p, which is going away, to the
// overflow map, with its jobs.
func (t *jobTable) overflowTraces(p *jobPage) {
	if p.traced == 0 {
		if p.traces != nil {
			t.keepTracePage(p.traces)
		}
		return
	}
	if t.traceOverflow == nil {
		t.traceOverflow = make(map[uint64]*jobTrace)
	}
	for i, j := range p.jobs {
		if j != nil && j.traced {
			tr := p.traces[i]
			t.traceOverflow[j.id] = &tr
		}
	}
	*p.traces = tracePage{}
	t.keepTracePage(p.traces)
}
