package metrics

import (
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Overflow is the name label shared by every name past a Limiter's cap, and
// by names that cannot be labels (see [Limiter]). A real function or tube
// named "_overflow" is counted with them.
const Overflow = "_overflow"

// MaxNameLen is the longest name a Limiter gives its own label. Longer names
// (beanstalkd caps tubes at 200 bytes; Gearman function names are
// unbounded) go to Overflow, so a client cannot make the limiter keep
// megabytes of key per name.
const MaxNameLen = 200

// MaxNamesLimit is the largest cap a Limiter accepts. Admission copies the
// name map (see Limiter), so the total admission work grows with the square
// of the cap; past this the series count is unreasonable for Prometheus
// anyway.
const MaxNamesLimit = 10000

// Limiter maps function/tube names to per-name values (series handles),
// giving the first max distinct names their own value and every later one
// a shared overflow value made with the label Overflow. Names that are not
// valid UTF-8 (a Prometheus label must be) or are longer than MaxNameLen
// also get the overflow value and do not use up the cap.
//
// Lookups of a name already admitted, and every lookup once the cap is
// reached, are lock-free and allocation-free: the name table is an
// immutable map behind an atomic pointer, replaced by a copy (under a mutex)
// each time a name is admitted. With at most MaxNamesLimit admissions over a
// process's life that copying is cheap, and it keeps the hot path to one
// atomic load and one map lookup. It is safe for concurrent use.
type Limiter[V any] struct {
	max     int
	newFunc func(label string) V

	names    atomic.Pointer[map[string]V] // immutable once published
	overflow atomic.Pointer[V]            // made on first use, so an unused overflow series never appears
	mu       sync.Mutex                   // serializes admissions and the making of overflow
}

// NewLimiter returns a Limiter admitting up to n names (clamped to
// 0..MaxNamesLimit), calling newFunc once per admitted name, and once with
// Overflow, to make its value. newFunc is called with the limiter's lock
// held and must not call back into it.
func NewLimiter[V any](n int, newFunc func(label string) V) *Limiter[V] {
	l := &Limiter[V]{max: min(max(n, 0), MaxNamesLimit), newFunc: newFunc}
	empty := make(map[string]V)
	l.names.Store(&empty)
	return l
}

// Get returns name's value, admitting name if there is room.
func (l *Limiter[V]) Get(name string) V {
	if v, ok := (*l.names.Load())[name]; ok {
		return v
	}
	return l.admit(name, nil)
}

// GetBytes is Get for a name held in a byte slice, such as a codec value
// aliasing a read buffer. It does not allocate for a known name or once the
// cap is reached; name is copied when it is admitted.
func (l *Limiter[V]) GetBytes(name []byte) V {
	// The compiler turns a map index by string(b) into a lookup without a
	// conversion or allocation.
	if v, ok := (*l.names.Load())[string(name)]; ok {
		return v
	}
	return l.admit("", name)
}

// admit is the slow path of Get (s) and GetBytes (b, when s is empty).
func (l *Limiter[V]) admit(s string, b []byte) V {
	n := len(s)
	if b != nil {
		n = len(b)
	}
	cur := *l.names.Load()
	if len(cur) >= l.max {
		// The caller's lookup may have raced the admission of this very
		// name into the last place: look again before overflowing.
		v, ok := cur[s]
		if b != nil {
			v, ok = cur[string(b)]
		}
		if ok {
			return v
		}
		return l.Overflow()
	}
	if n > MaxNameLen || s == Overflow || string(b) == Overflow {
		return l.Overflow()
	}
	if b != nil {
		if !utf8.Valid(b) {
			return l.Overflow()
		}
		s = string(b)
	} else if !utf8.ValidString(s) {
		return l.Overflow()
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	cur = *l.names.Load()
	if v, ok := cur[s]; ok { // admitted by another goroutine meanwhile
		return v
	}
	if len(cur) >= l.max {
		return l.overflowLocked()
	}
	next := make(map[string]V, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	v := l.newFunc(s)
	next[s] = v
	l.names.Store(&next)
	return v
}

// Overflow returns the shared value of names past the cap, making it on
// first use.
func (l *Limiter[V]) Overflow() V {
	if p := l.overflow.Load(); p != nil {
		return *p
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.overflowLocked()
}

func (l *Limiter[V]) overflowLocked() V {
	if p := l.overflow.Load(); p != nil {
		return *p
	}
	v := l.newFunc(Overflow)
	l.overflow.Store(&v)
	return v
}

// Len returns how many names have their own value.
func (l *Limiter[V]) Len() int { return len(*l.names.Load()) }

// Max returns the cap on names with their own value.
func (l *Limiter[V]) Max() int { return l.max }

// Label returns the label name gets: name itself once admitted, Overflow
// otherwise. Like Get it admits name if there is room, so a name first seen
// at scrape time (a queue replayed from the journal) gets its label.
func (l *Limiter[V]) Label(name string) string {
	if _, ok := (*l.names.Load())[name]; ok {
		return name
	}
	l.admit(name, nil)
	if _, ok := (*l.names.Load())[name]; ok {
		return name
	}
	return Overflow
}
