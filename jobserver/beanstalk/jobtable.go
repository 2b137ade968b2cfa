package beanstalk

// jobTable maps job ids to jobs. Ids are handed out in sequence and jobs
// mostly finish in roughly the order they came, so the table keeps pages of
// consecutive ids, 8 bytes a job against the 25 to 38 of a Go map (the
// memory per queued job is a target). A page that is fully issued and has
// few jobs left moves them to an overflow map and goes away, so a
// straggler (a job buried for a week) does not pin a whole page.
type jobTable struct {
	pages    map[uint64]*jobPage // by id >> pageBits
	overflow map[uint64]*job
	maxID    uint64 // highest id ever added
	// traceMap holds the traces of traced overflow jobs and of pages
	// with few traced jobs (tracetable.go); nil until the first.
	traceMap map[uint64]*jobTrace
	// spareTraces is a trace page no page holds, all zero, kept for reuse.
	spareTraces *tracePage
}

const (
	pageBits = 10
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
	// sparseLive is the number of jobs below which a fully issued page
	// moves its jobs to the overflow map.
	sparseLive = pageSize / 32
)

type jobPage struct {
	jobs [pageSize]*job
	live int
	// traces holds the traces of the page's traced jobs once they are
	// many, else nil (tracetable.go); traced counts them, tracedAdded
	// counts every traced job the page was given.
	traces      *tracePage
	traced      int
	tracedAdded int
}

func newJobTable() jobTable {
	return jobTable{pages: make(map[uint64]*jobPage), overflow: make(map[uint64]*job)}
}

func (t *jobTable) get(id uint64) *job {
	if p := t.pages[id>>pageBits]; p != nil {
		if j := p.jobs[id&pageMask]; j != nil {
			return j
		}
	}
	return t.overflow[id]
}

// add stores j, whose id is not in the table.
func (t *jobTable) add(j *job) {
	n := j.id >> pageBits
	p := t.pages[n]
	if p == nil {
		// The page being filled until now is done: ids can skip pages
		// (a refused put uses one, a restart resumes at the journal's
		// counter), so it is the page of maxID, not always n-1.
		if last := t.maxID >> pageBits; n > last {
			t.dropEmpty(last)
			t.issueTraces(last)
		}
		p = new(jobPage)
		t.pages[n] = p
	}
	p.jobs[j.id&pageMask] = j
	p.live++
	t.maxID = max(t.maxID, j.id)
}

func (t *jobTable) remove(id uint64) {
	n := id >> pageBits
	p := t.pages[n]
	if p == nil || p.jobs[id&pageMask] == nil {
		delete(t.overflow, id)
		return
	}
	p.jobs[id&pageMask] = nil
	p.live--
	if p.live >= sparseLive || n >= t.maxID>>pageBits {
		return // dense, or still being filled: new ids land here
	}
	for _, j := range p.jobs {
		if j != nil {
			t.overflow[j.id] = j
		}
	}
	t.overflowTraces(p)
	delete(t.pages, n)
}

// dropEmpty removes page n, the page filled until a new one starts, if it
// has no jobs left. A page emptied while still being filled stays (new ids
// land there) and no later remove visits it: without this, a strict cycle
// of put and delete kept every page, and its trace slots (tracetable.go),
// for good.
func (t *jobTable) dropEmpty(n uint64) {
	if p := t.pages[n]; p != nil && p.live == 0 {
		if p.traces != nil && p.traced == 0 {
			t.keepTracePage(p.traces) // all zero: no traced job left
		}
		delete(t.pages, n)
	}
}
