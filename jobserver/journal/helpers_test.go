package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// quietLogger drops everything: damage is asserted through ReplayReport.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// model is a toy engine. A job's state is a body whose last 8 bytes are the
// mutable part (think priority and delay); an Update carries new last 8
// bytes. It applies records exactly as the package doc tells engines to.
type model struct {
	mu    sync.Mutex
	state map[uint64][]byte
	j     *Journal
}

func newModel() *model { return &model{state: make(map[uint64][]byte)} }

// apply is the replay function.
func (m *model) apply(r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch r.Kind {
	case Full:
		if len(r.Data) < 8 {
			return fmt.Errorf("full record of key %d has %d bytes", r.Key, len(r.Data))
		}
		m.state[r.Key] = bytes.Clone(r.Data)
	case Update:
		if s, ok := m.state[r.Key]; ok {
			copy(s[len(s)-8:], r.Data)
		}
	case Delete:
		delete(m.state, r.Key)
	}
	return nil
}

// snapshot is Options.Snapshot.
func (m *model) snapshot(key uint64, put func([]byte)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.state[key]; ok {
		put(s)
	}
}

// put creates or replaces key with body||tail and journals a Full record.
func (m *model) put(key uint64, body []byte, tail uint64) Ticket {
	s := make([]byte, len(body)+8)
	copy(s, body)
	binary.LittleEndian.PutUint64(s[len(body):], tail)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state[key] = s
	t, err := m.j.AppendAsync(Record{Key: key, Kind: Full, Data: s})
	if err != nil {
		panic(err)
	}
	return t
}

// update sets the tail of key, if live, and journals an Update.
func (m *model) update(key uint64, tail uint64) Ticket {
	var d [8]byte
	binary.LittleEndian.PutUint64(d[:], tail)
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.state[key]
	if !ok {
		return Ticket{}
	}
	copy(s[len(s)-8:], d[:])
	t, err := m.j.AppendAsync(Record{Key: key, Kind: Update, Data: d[:]})
	if err != nil {
		panic(err)
	}
	return t
}

// del removes key, if live, and journals a Delete.
func (m *model) del(key uint64) Ticket {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.state[key]; !ok {
		return Ticket{}
	}
	delete(m.state, key)
	t, err := m.j.AppendAsync(Record{Key: key, Kind: Delete})
	if err != nil {
		panic(err)
	}
	return t
}

// liveBytes is the size the live state takes as Full records.
func (m *model) liveBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, s := range m.state {
		n += frameSize(len(s))
	}
	return n
}

func (m *model) equal(t *testing.T, other *model) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.state) != len(other.state) {
		t.Fatalf("replayed %d live keys, want %d", len(other.state), len(m.state))
	}
	for k, s := range m.state {
		got, ok := other.state[k]
		if !ok {
			t.Fatalf("key %d missing after replay", k)
		}
		if !bytes.Equal(got, s) {
			t.Fatalf("key %d replayed as %x, want %x", k, got, s)
		}
	}
}

// openModel opens dir with m (which may be fresh) as replay target and
// snapshot source.
func openModel(t testing.TB, dir string, opts Options, m *model) (*Journal, ReplayReport) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	opts.Snapshot = m.snapshot
	j, rep, err := Open(dir, opts, m.apply)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	m.j = j
	return j, rep
}

// collect opens dir and returns every replayed record (with copied data)
// and the report, then closes it.
func collect(t testing.TB, dir string, opts Options) ([]Record, ReplayReport) {
	t.Helper()
	var got []Record
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	j, rep, err := Open(dir, opts, func(r Record) error {
		r.Data = bytes.Clone(r.Data)
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return got, rep
}

// testRecord is record i of a deterministic sequence with varied kinds and
// sizes, including empty data.
func testRecord(i int) Record {
	kind := []Kind{Full, Update, Full, Delete}[i%4]
	data := make([]byte, (i*37)%300)
	for k := range data {
		data[k] = byte(i + k)
	}
	return Record{Key: uint64(i) * 7, Kind: kind, Data: data}
}

func sameRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.Kind != w.Kind || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("record %d = {%d %v %d bytes}, want {%d %v %d bytes}",
				i, g.Key, g.Kind, len(g.Data), w.Key, w.Kind, len(w.Data))
		}
	}
}

// dirBytes is the total size of the segment files in dir.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	seqs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, seq := range seqs {
		st, err := os.Stat(filepath.Join(dir, segmentName(seq)))
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	seqs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, seq := range seqs {
		names = append(names, filepath.Join(dir, segmentName(seq)))
	}
	sort.Strings(names)
	return names
}

// syncCounter is an Options.syncFile that counts calls once armed.
type syncCounter struct {
	armed atomic.Bool
	n     atomic.Int64
}

func (c *syncCounter) sync(f *os.File) error {
	if c.armed.Load() {
		c.n.Add(1)
	}
	return f.Sync()
}

// noSync skips fsync, for tests that reopen a directory many times and do
// not test durability.
func noSync(*os.File) error { return nil }

func noDirSync(string) error { return nil }

// waitFor polls cond until it holds, failing after a generous deadline. It
// waits for a condition another goroutine is about to make true; it is not
// a timing assumption.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(50 * time.Microsecond)
	}
}

// compactionSettled waits until the automatic compactor has handled every
// rotation so far.
func compactionSettled(t testing.TB, j *Journal) {
	t.Helper()
	sent := j.kicksSent.Load()
	waitFor(t, "automatic compaction", func() bool { return j.kicksDone.Load() >= sent })
}

func mustAppend(t testing.TB, j *Journal, r Record) {
	t.Helper()
	if err := j.Append(r); err != nil {
		t.Fatalf("Append(%d, %v): %v", r.Key, r.Kind, err)
	}
}
