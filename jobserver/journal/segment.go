package journal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A segment is one file of the log, named by its sequence number in 16 hex
// digits ("000000000000002a.jnl") so that a directory listing sorts in log
// order. It starts with a 16-byte header, the magic and version followed by
// the sequence number again, so a file copied or renamed by hand into the
// wrong place is noticed instead of replayed out of order. Records follow
// back to back; there is no footer, so a segment is valid up to its first
// bad frame.
const (
	segmentExt        = ".jnl"
	segmentHeaderSize = 16
)

// segmentMagic is "JGJRNL", a zero and the format version.
var segmentMagic = [8]byte{'J', 'G', 'J', 'R', 'N', 'L', 0, 1}

// segment is the journal's bookkeeping for one segment file. All fields are
// guarded by Journal.mu.
type segment struct {
	seq uint64
	// size is the file's length once every record assigned to it is
	// written; records are assigned at enqueue time, so it runs ahead of
	// the file while batches wait for the writer.
	size int64
	// readable is how far the records can be trusted: size, except for a
	// damaged older segment found at Open, where it is the offset of the
	// first bad frame. Compaction reads only this far.
	readable int64
}

func segmentName(seq uint64) string { return fmt.Sprintf("%016x%s", seq, segmentExt) }

// parseSegmentName returns the sequence number of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil && seq > 0
}

func segmentHeader(seq uint64) []byte {
	h := make([]byte, segmentHeaderSize)
	copy(h, segmentMagic[:])
	binary.LittleEndian.PutUint64(h[8:], seq)
	return h
}

// listSegments returns the sequence numbers of the segment files in dir,
// ascending. Other files are ignored.
func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range entries {
		if seq, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// createSegment creates segment seq with its header and makes both the file
// and its directory entry durable, so a record acknowledged in it can never
// vanish with the file.
func createSegment(dir string, seq uint64, syncFile func(*os.File) error, syncDir func(string) error) (*os.File, error) {
	path := filepath.Join(dir, segmentName(seq))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: create segment: %w", err)
	}
	if _, err := f.Write(segmentHeader(seq)); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: write segment header %s: %w", path, err)
	}
	if err := syncFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: sync %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// syncDir fsyncs a directory so that file creations and removals in it
// survive a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: open dir for sync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: sync dir %s: %w", dir, err)
	}
	return nil
}

// scanResult describes one pass over a segment file.
type scanResult struct {
	// end is the offset just past the last good frame, or 0 when the
	// header itself is bad.
	end int64
	// size is the length of the file (or of the part scanned).
	size int64
	// records is the number of good frames read.
	records int64
	// damage says why reading stopped before size; empty when the whole
	// file was read.
	damage string
	// foreign is set when the header is complete but not this segment's:
	// not something a crash leaves behind.
	foreign bool
}

// scanBufferSize is the read buffer of a scan: large enough that replay is
// bound by checksumming and the callback, not by read calls.
const scanBufferSize = 1 << 20

// scanSegment reads segment seq at path up to limit bytes (the whole file
// when limit < 0) and calls fn for every good record, in order. It stops at
// the first frame that is torn, malformed or fails its checksum and reports
// why in the result; only I/O errors and fn's error are returned as errors.
// buf is reused for the records' Data between calls.
func scanSegment(path string, seq uint64, limit int64, buf *[]byte, fn func(Record) error) (scanResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return scanResult{}, fmt.Errorf("journal: open segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return scanResult{}, fmt.Errorf("journal: stat segment: %w", err)
	}
	size := st.Size()
	if limit >= 0 && limit < size {
		size = limit
	}
	r := bufio.NewReaderSize(io.LimitReader(f, size), int(min(scanBufferSize, max(size, 16))))
	return scanFrames(r, size, seq, path, buf, fn)
}

// scanFrames is scanSegment on a reader holding size bytes of segment seq;
// name is for error messages.
func scanFrames(r io.Reader, size int64, seq uint64, name string, buf *[]byte, fn func(Record) error) (scanResult, error) {
	res := scanResult{size: size}
	var hdr [frameHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:segmentHeaderSize]); err != nil {
		if isEOF(err) {
			res.damage = "segment header torn"
			return res, nil
		}
		return res, fmt.Errorf("journal: read %s: %w", name, err)
	}
	switch {
	case bytes.Equal(hdr[:segmentHeaderSize], make([]byte, segmentHeaderSize)):
		// The file's length reached the disk but its header did not: a
		// crash while the segment was being created.
		res.damage = "segment header torn (zeros)"
		return res, nil
	case bytes.Equal(hdr[:7], segmentMagic[:7]) && hdr[7] != segmentMagic[7]:
		return res, fmt.Errorf("%w: %s has format version %d, this build reads version %d",
			ErrFormat, name, hdr[7], segmentMagic[7])
	case !bytes.Equal(hdr[:8], segmentMagic[:]):
		res.damage = "segment header has a bad magic number"
		res.foreign = true
		return res, nil
	}
	if got := binary.LittleEndian.Uint64(hdr[8:16]); got != seq {
		res.damage = fmt.Sprintf("segment header names segment %d", got)
		res.foreign = true
		return res, nil
	}
	res.end = segmentHeaderSize

	for res.end < res.size {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if isEOF(err) {
				res.damage = "record header torn"
				return res, nil
			}
			return res, fmt.Errorf("journal: read %s: %w", name, err)
		}
		fh := parseFrameHeader(hdr[:])
		if !fh.kind.valid() {
			res.damage = fmt.Sprintf("record has unknown kind %d", uint8(fh.kind))
			return res, nil
		}
		// A length running past the end is a torn write or a damaged
		// length; either way it must not size an allocation.
		if int64(fh.n) > res.size-res.end-frameHeaderSize {
			res.damage = fmt.Sprintf("record of %d bytes runs past the end of the file", fh.n)
			return res, nil
		}
		if cap(*buf) < int(fh.n) {
			*buf = make([]byte, fh.n)
		}
		data := (*buf)[:fh.n]
		if _, err := io.ReadFull(r, data); err != nil {
			if isEOF(err) { // the file shrank under us
				res.damage = "record torn"
				return res, nil
			}
			return res, fmt.Errorf("journal: read %s: %w", name, err)
		}
		if !fh.verify(hdr[:], data) {
			res.damage = "record checksum mismatch"
			return res, nil
		}
		if err := fn(Record{Key: fh.key, Kind: fh.kind, Data: data}); err != nil {
			return res, err
		}
		res.end += frameSize(int(fh.n))
		res.records++
	}
	return res, nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }
