package tracing

import "strconv"

// leanHeadCache keeps, for the last few distinct combinations, the span
// name field and the first four attributes of a span (system, operation
// type, operation name, destination) as encoded. A job's spans repeat them
// (one function, three operations), so most spans copy them in two pieces
// instead of checking and framing six strings. An entry is found by
// comparing the span's strings with the value bytes inside the encoding
// itself: what was written is what is compared, so the cache holds no
// strings of the spans' (which may share a job's buffer), and a value that
// needed its invalid UTF-8 replaced never matches and is encoded anew each
// time.
type leanHeadCache struct {
	next int
	ent  [leanHeadEntries]leanHeadEntry
	id   leanIDHead
}

// leanIDHead is the message id attribute up to its number, for the last
// handle prefix (a server's handles share one): its template, the value's
// length byte and the prefix. Like the entries, it is matched against the
// prefix as written, so a prefix with invalid UTF-8 never matches.
type leanIDHead struct {
	enc  []byte
	from int // where the prefix begins in enc
}

// maxLeanIDPrefix bounds the prefixes appendMsgID caches, so that the
// attribute's lengths all take one byte (the value has at most 20 digits
// more).
const maxLeanIDPrefix = 80

// leanHeadEntries is how many combinations the cache keeps: a job's
// three operations and one more.
const leanHeadEntries = 4

type leanHeadEntry struct {
	used bool
	// enc is the name field, then the four attributes from nameEnd on.
	enc     []byte
	nameEnd int32
	// val[i] is where the i-th attribute's value lies in enc (empty when
	// the attribute is unset); name is where the span name's value lies.
	val  [4]struct{ from, to int32 }
	name struct{ from, to int32 }
}

// maxLeanHeadEntry bounds a cached encoding, so that one long name does
// not stay held.
const maxLeanHeadEntry = 512

// headFields returns the four attribute strings of s the cache covers, in
// order.
func headFields(s *leanSpan) [4]string {
	return [4]string{s.system, s.opType, s.opName, s.dest}
}

var headTemplates = [4][]byte{headSystem, headOpType, headOpName, headDest}

// lookup returns the encoded name field and first four attributes of s,
// valid until the next lookup.
func (c *leanHeadCache) lookup(s *leanSpan) (name, head []byte) {
	f := headFields(s)
	for i := range c.ent {
		e := &c.ent[i]
		if e.used && e.matches(&f, s.name, s.nameDest) {
			return e.enc[:e.nameEnd], e.enc[e.nameEnd:]
		}
	}
	e := &c.ent[c.next]
	enc := appendName(e.enc[:0], s.name, s.nameDest)
	nameEnd := len(enc)
	for i, v := range f {
		enc = appendStrKV(enc, headTemplates[i], v)
		n := len(validString(v))
		e.val[i].from, e.val[i].to = int32(len(enc)-n), int32(len(enc))
	}
	if len(enc) > maxLeanHeadEntry {
		*e = leanHeadEntry{} // not kept: the entry lets its buffer go
		return enc[:nameEnd], enc[nameEnd:]
	}
	c.next = (c.next + 1) % leanHeadEntries
	e.enc, e.used, e.nameEnd = enc, true, int32(nameEnd)
	// The name's value is what follows its tag and length.
	nlen := len(validString(s.name))
	if s.nameDest != "" {
		nlen += 1 + len(validString(s.nameDest))
	}
	e.name.from, e.name.to = int32(nameEnd-nlen), int32(nameEnd)
	return enc[:nameEnd], enc[nameEnd:]
}

// matches compares the operation type first: it is what tells a job's
// spans apart, so a wrong entry is left after one short comparison. The
// name is compared as written: name, or name + " " + dest.
func (e *leanHeadEntry) matches(f *[4]string, name, dest string) bool {
	v := &e.val
	if string(e.enc[v[1].from:v[1].to]) != f[1] ||
		string(e.enc[v[2].from:v[2].to]) != f[2] ||
		string(e.enc[v[3].from:v[3].to]) != f[3] ||
		string(e.enc[v[0].from:v[0].to]) != f[0] {
		return false
	}
	w := e.enc[e.name.from:e.name.to]
	if dest == "" {
		return string(w) == name
	}
	return len(w) == len(name)+1+len(dest) && string(w[:len(name)]) == name &&
		w[len(name)] == ' ' && string(w[len(name)+1:]) == dest
}

// appendMsgID appends the message id attribute whose value is prefix
// followed by n in decimal, as appendNumKV does: the template and the
// prefix are copied in one piece and the lengths filled in once the
// digits are written.
func (c *leanHeadCache) appendMsgID(b []byte, prefix string, n uint64) []byte {
	h := &c.id
	if len(h.enc) == 0 || string(h.enc[h.from:]) != prefix {
		v := validString(prefix)
		if len(v) > maxLeanIDPrefix {
			return appendNumKV(b, headMsgID, prefix, n)
		}
		enc := append(h.enc[:0], headMsgID...)
		enc = append(enc, 0) // the value's length
		h.from = len(enc)
		h.enc = append(enc, v...)
	}
	at := len(b)
	b = append(b, h.enc...)
	b = strconv.AppendUint(b, n, 10)
	vl := len(b) - at - h.from // the value: prefix and digits
	av := 2 + vl               // the AnyValue: its tag, the length and the value
	b[at+1] = byte(len(headMsgID) - 3 + av)
	b[at+len(headMsgID)-2] = byte(av)
	b[at+h.from-1] = byte(vl)
	return b
}
