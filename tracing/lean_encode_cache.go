package tracing

// leanHeadCache keeps the first four attributes of a span (system,
// operation type, operation name, destination) as encoded for the last few
// distinct combinations. A job's spans repeat them (one function, three
// operations), so most spans copy them in one piece instead of checking
// and framing four strings. An entry is found by comparing the span's
// strings with the value bytes inside the encoding itself: what was
// written is what is compared, so the cache holds no strings of the spans'
// (which may share a job's buffer), and a value that needed its invalid
// UTF-8 replaced never matches and is encoded anew each time.
type leanHeadCache struct {
	next int
	ent  [leanHeadEntries]leanHeadEntry
}

// leanHeadEntries is how many combinations the cache keeps: a job's
// three operations and one more.
const leanHeadEntries = 4

type leanHeadEntry struct {
	used bool
	enc  []byte
	// val[i] is where the i-th attribute's value lies in enc (empty when
	// the attribute is unset).
	val [4]struct{ from, to int32 }
}

// maxLeanHeadEntry bounds a cached encoding, so that one long name does
// not stay held.
const maxLeanHeadEntry = 512

// headFields returns the four strings of s the cache covers, in order.
func headFields(s *leanSpan) [4]string {
	return [4]string{s.system, s.opType, s.opName, s.dest}
}

var headTemplates = [4][]byte{headSystem, headOpType, headOpName, headDest}

// appendHead appends s's first four attributes.
func (c *leanHeadCache) appendHead(b []byte, s *leanSpan) []byte {
	f := headFields(s)
	for i := range c.ent {
		e := &c.ent[i]
		if e.used && e.matches(&f) {
			return append(b, e.enc...)
		}
	}
	e := &c.ent[c.next]
	c.next = (c.next + 1) % leanHeadEntries
	enc := e.enc[:0]
	for i, v := range f {
		enc = appendStrKV(enc, headTemplates[i], v)
		n := len(validString(v))
		e.val[i].from, e.val[i].to = int32(len(enc)-n), int32(len(enc))
	}
	b = append(b, enc...)
	if len(enc) > maxLeanHeadEntry {
		*e = leanHeadEntry{}
		return b
	}
	e.enc, e.used = enc, true
	return b
}

// matches compares the operation type first: it is what tells a job's
// spans apart, so a wrong entry is left after one short comparison.
func (e *leanHeadEntry) matches(f *[4]string) bool {
	v := &e.val
	return string(e.enc[v[1].from:v[1].to]) == f[1] &&
		string(e.enc[v[2].from:v[2].to]) == f[2] &&
		string(e.enc[v[3].from:v[3].to]) == f[3] &&
		string(e.enc[v[0].from:v[0].to]) == f[0]
}
