package journal

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fastOpts skips fsync: these tests reopen a directory hundreds of times
// and are about parsing, not durability.
var fastOpts = Options{Sync: Never, Logger: quietLogger, syncFile: noSync}

// writeRecords creates dir with the given records in one segment and
// returns the segment's path and the offset each frame starts at.
func writeRecords(t *testing.T, dir string, recs []Record) (string, []int64) {
	t.Helper()
	j, _, err := Open(dir, fastOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	off := int64(segmentHeaderSize)
	for _, r := range recs {
		offs = append(offs, off)
		off += frameSize(len(r.Data))
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	files := segmentFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d segments", len(files))
	}
	return files[0], append(offs, off)
}

func someRecords(n int) []Record {
	var recs []Record
	for i := range n {
		recs = append(recs, testRecord(i+1))
	}
	return recs
}

// checkRecovered reopens dir, expects exactly want replayed and the given
// damage, then appends one record and expects it after want on the next
// open, with no damage: the repair left a clean tail.
func checkRecovered(t *testing.T, dir string, want []Record, damageAt int64, lost int64) {
	t.Helper()
	got, rep := collect(t, dir, fastOpts)
	sameRecords(t, got, want)
	if lost >= 0 {
		if len(rep.Damage) != 1 {
			t.Fatalf("damage = %v, want one at %d", rep.Damage, damageAt)
		}
		d := rep.Damage[0]
		if !d.Truncated || d.Offset != damageAt || d.Lost != lost {
			t.Fatalf("damage = %+v, want truncated at %d losing %d", d, damageAt, lost)
		}
	} else if len(rep.Damage) != 0 {
		t.Fatalf("unexpected damage %v", rep.Damage)
	}
	j, _, err := Open(dir, fastOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	extra := Record{Key: 999999, Kind: Full, Data: []byte("after repair")}
	if err := j.Append(extra); err != nil {
		t.Fatal(err)
	}
	j.Close()
	got, rep = collect(t, dir, fastOpts)
	sameRecords(t, got, append(append([]Record{}, want...), extra))
	if len(rep.Damage) != 0 {
		t.Fatalf("damage after repair: %v", rep.Damage)
	}
}

// copyDir returns a directory holding data as the segment file path
// names. It reuses one directory per test, rewriting the file in place:
// creating files is slow on some CI disks, and these tests make thousands
// of variants.
func copyDir(t *testing.T, path string, data []byte) string {
	t.Helper()
	name := t.Name()
	dir := scratch[name]
	if dir == "" {
		dir = t.TempDir()
		scratch[name] = dir
		t.Cleanup(func() { delete(scratch, name) })
	}
	seqs, _ := listSegments(dir)
	for _, seq := range seqs {
		if segmentName(seq) != filepath.Base(path) {
			os.Remove(filepath.Join(dir, segmentName(seq)))
		}
	}
	// Overwrite and cut rather than os.WriteFile: truncating to zero frees
	// the blocks, which is slow on disks mounted with discard.
	f, err := os.OpenFile(filepath.Join(dir, filepath.Base(path)), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// scratch maps a test's name to its reusable directory, for the length
// of the test. Only the test's own goroutine uses it.
var scratch = map[string]string{}

// TestTornTailEveryOffset cuts the segment at every byte offset: replay
// returns exactly the records that end before the cut and repairs the rest.
func TestTornTailEveryOffset(t *testing.T) {
	recs := someRecords(12)
	path, offs := writeRecords(t, t.TempDir(), recs)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != offs[len(offs)-1] {
		t.Fatalf("file is %d bytes, frames end at %d", len(data), offs[len(offs)-1])
	}
	for cut := int64(0); cut <= int64(len(data)); cut++ {
		whole := 0 // records that end at or before cut
		for whole < len(recs) && offs[whole+1] <= cut {
			whole++
		}
		dir := copyDir(t, path, data[:cut])
		switch {
		case cut == int64(len(data)) || cut == offs[whole] && cut >= segmentHeaderSize:
			checkRecovered(t, dir, recs[:whole], 0, -1) // clean cut between frames
		case cut < segmentHeaderSize:
			checkRecovered(t, dir, nil, 0, cut) // torn header: rewritten
		default:
			checkRecovered(t, dir, recs[:whole], offs[whole], cut-offs[whole])
		}
	}
}

// TestFlippedByteInLastRecord flips each byte of the last record (and some
// bits): the record is dropped and reported, the earlier ones replay.
func TestFlippedByteInLastRecord(t *testing.T) {
	recs := someRecords(6)
	recs[5].Data = []byte("the last record's data")
	path, offs := writeRecords(t, t.TempDir(), recs)
	data, _ := os.ReadFile(path)
	last := offs[5]
	for i := last; i < int64(len(data)); i++ {
		for _, mask := range []byte{0xff, 0x01, 0x80} {
			bad := bytes.Clone(data)
			bad[i] ^= mask
			dir := copyDir(t, path, bad)
			checkRecovered(t, dir, recs[:5], last, int64(len(data))-last)
		}
	}
}

// TestFlippedByteMidSegment: damage in the middle of the newest segment
// loses what follows it in that segment (frames have no sync marks), and
// the loss is reported.
func TestFlippedByteMidSegment(t *testing.T) {
	recs := someRecords(10)
	path, offs := writeRecords(t, t.TempDir(), recs)
	data, _ := os.ReadFile(path)
	bad := bytes.Clone(data)
	bad[offs[4]+frameHeaderSize-1] ^= 0x10 // a key byte of record 4
	dir := copyDir(t, path, bad)
	checkRecovered(t, dir, recs[:4], offs[4], int64(len(data))-offs[4])
}

// TestZeroFilledTail: after a power loss some filesystems show the new
// length of the file with zeros where the data never landed.
func TestZeroFilledTail(t *testing.T) {
	recs := someRecords(5)
	path, offs := writeRecords(t, t.TempDir(), recs)
	data, _ := os.ReadFile(path)
	dir := copyDir(t, path, append(bytes.Clone(data), make([]byte, 4096)...))
	checkRecovered(t, dir, recs, offs[5], 4096)
}

// TestBadSegmentHeader: a newest segment whose header is zeros (created,
// then a crash before the header reached the disk) is reset; one with a
// complete wrong header is refused, since no crash explains it; an older
// one is skipped and reported; another format version is refused.
func TestBadSegmentHeader(t *testing.T) {
	recs := someRecords(3)
	path, _ := writeRecords(t, t.TempDir(), recs)
	data, _ := os.ReadFile(path)

	dir := copyDir(t, path, make([]byte, 100))
	checkRecovered(t, dir, nil, 0, 100)

	bad := bytes.Clone(data)
	bad[2] = 'X'
	dir = copyDir(t, path, bad)
	if _, _, err := Open(dir, fastOpts, nil); !errors.Is(err, ErrForeign) {
		t.Fatalf("Open with a foreign newest segment: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, filepath.Base(path))); !bytes.Equal(got, bad) {
		t.Fatal("the refused segment was modified")
	}
	// Renamed: the header names another segment.
	dir = copyDir(t, path, data)
	os.Rename(filepath.Join(dir, segmentName(1)), filepath.Join(dir, segmentName(7)))
	if _, _, err := Open(dir, fastOpts, nil); !errors.Is(err, ErrForeign) {
		t.Fatalf("Open with a renamed newest segment: %v", err)
	}
	os.Remove(filepath.Join(dir, segmentName(7)))

	// As an older segment, followed by an intact one: reported, skipped.
	dir = copyDir(t, path, bad)
	os.WriteFile(filepath.Join(dir, segmentName(2)), segmentHeader(2), 0o644)
	got, rep := collect(t, dir, fastOpts)
	if len(got) != 0 || len(rep.Damage) != 1 || rep.Damage[0].Truncated || rep.Damage[0].Segment != segmentName(1) {
		t.Fatalf("got %d records, damage %v", len(got), rep.Damage)
	}
	os.Remove(filepath.Join(dir, segmentName(2)))

	// Another format version, anywhere: refused.
	newer := bytes.Clone(data)
	newer[7] = 2
	dir = copyDir(t, path, newer)
	if _, _, err := Open(dir, fastOpts, nil); !errors.Is(err, ErrFormat) {
		t.Fatalf("Open with format version 2: %v", err)
	}
}

// TestCorruptOlderSegment: damage in a sealed segment stops that segment
// only; later segments replay, nothing is truncated, and compaction later
// removes the damaged file.
func TestCorruptOlderSegment(t *testing.T) {
	dir := t.TempDir()
	opts := fastOpts
	opts.SegmentSize = 2048
	opts.NoAutoCompact = true
	m := newModel()
	j, _ := openModel(t, dir, opts, m)
	for k := range uint64(60) {
		m.put(k, bytes.Repeat([]byte{byte(k)}, 80), k).Wait()
	}
	j.Close()
	files := segmentFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("%d segments", len(files))
	}
	// Flip a data byte of the third record of the first segment.
	data, _ := os.ReadFile(files[0])
	sizeBefore := len(data)
	rec := int64(segmentHeaderSize) + 2*frameSize(88)
	data[rec+frameHeaderSize+5] ^= 0xff
	os.WriteFile(files[0], data, 0o644)

	var logged strings.Builder
	logOpts := opts
	logOpts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	m2 := newModel()
	j, rep := openModel(t, dir, logOpts, m2)
	if !strings.Contains(logged.String(), "damaged segment") || !strings.Contains(logged.String(), filepath.Base(files[0])) {
		t.Fatalf("damage not logged: %q", logged.String())
	}
	if len(rep.Damage) != 1 {
		t.Fatalf("damage = %v", rep.Damage)
	}
	d := rep.Damage[0]
	if d.Truncated || d.Segment != filepath.Base(files[0]) || d.Offset != rec || d.Lost != int64(sizeBefore)-rec {
		t.Fatalf("damage = %+v", d)
	}
	if fi, _ := os.Stat(files[0]); fi.Size() != int64(sizeBefore) {
		t.Fatal("the damaged older segment was modified")
	}
	// Keys 0 and 1 come before the damage, the ones in later segments
	// after it; the rest of the first segment is lost.
	perSeg := int((2048 - segmentHeaderSize) / frameSize(88))
	for k := range uint64(60) {
		_, ok := m2.state[k]
		want := k < 2 || int(k) >= perSeg
		if ok != want {
			t.Fatalf("key %d present=%v, want %v", k, ok, want)
		}
	}
	// Appends go on; compaction rewrites what is live and removes the
	// damaged segment.
	m2.put(100, []byte("new"), 1).Wait()
	if err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Fatalf("damaged segment still there: %v", err)
	}
	j.Close()
	m3 := newModel()
	j, rep = openModel(t, dir, opts, m3)
	j.Close()
	if len(rep.Damage) != 0 {
		t.Fatalf("damage after compaction: %v", rep.Damage)
	}
	m2.equal(t, m3)
}

// TestCompactionRefusesNewCorruption: a record that goes bad after Open
// makes compaction fail without removing anything.
func TestCompactionRefusesNewCorruption(t *testing.T) {
	dir := t.TempDir()
	opts := fastOpts
	opts.SegmentSize = 2048
	opts.NoAutoCompact = true
	m := newModel()
	j, _ := openModel(t, dir, opts, m)
	defer j.Close()
	for k := range uint64(40) {
		m.put(k, bytes.Repeat([]byte{byte(k)}, 80), k).Wait()
	}
	files := segmentFiles(t, dir)
	f, _ := os.OpenFile(files[0], os.O_RDWR, 0)
	f.WriteAt([]byte{0xde, 0xad}, segmentHeaderSize+frameHeaderSize+3)
	f.Close()
	if err := j.Compact(); err == nil || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Compact = %v, want ErrCorrupt", err)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("compaction removed %s", f)
		}
	}
}

// TestMissingSegment: a segment removed by hand from the middle is reported;
// the others replay.
func TestMissingSegment(t *testing.T) {
	dir := t.TempDir()
	opts := fastOpts
	opts.SegmentSize = 1024
	j, _, err := Open(dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		mustAppend(t, j, Record{Key: uint64(i), Kind: Full, Data: make([]byte, 100)})
	}
	j.Close()
	files := segmentFiles(t, dir)
	os.Remove(files[1])
	os.Remove(files[2])
	got, rep := collect(t, dir, opts)
	if len(rep.Damage) != 1 || rep.Damage[0].Lost != -1 || rep.Damage[0].Segment != filepath.Base(files[1]) ||
		!strings.Contains(rep.Damage[0].Reason, filepath.Base(files[2])) {
		t.Fatalf("damage = %v", rep.Damage)
	}
	perSeg := int((1024 - segmentHeaderSize) / frameSize(100))
	if len(got) != 40-2*perSeg {
		t.Fatalf("replayed %d records, want %d", len(got), 40-2*perSeg)
	}
}
