package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Kind says how a record changes the state of its key. See the package
// documentation for how replay applies each kind.
type Kind uint8

const (
	// Full carries the whole state of the key. It replaces whatever state
	// the key had, so replay may start from any Full record of a key.
	Full Kind = 1
	// Update carries a change the engine applies on top of the key's state
	// (release with a new priority or delay, bury, kick...). Replay must
	// ignore an Update for a key that has no state: compaction may leave
	// updates whose Full record is gone, always followed by a newer Full or
	// Delete of the same key, or else belonging to a key the engine had
	// already dropped.
	Update Kind = 2
	// Delete ends the key. Its Data is usually empty. Replay must ignore a
	// Delete for a key that has no state.
	Delete Kind = 3
)

// String returns "full", "update" or "delete".
func (k Kind) String() string {
	switch k {
	case Full:
		return "full"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= Full && k <= Delete }

// Record is one entry of the journal: a change to the state of the job
// identified by Key. Data is opaque to the journal; the engine encodes and
// decodes it.
type Record struct {
	// Key identifies the job: a beanstalk job id or a gearman job sequence.
	Key uint64
	// Kind says how Data changes the key's state.
	Kind Kind
	// Data is the engine's encoding of the state or change. Append copies
	// it, so the caller may reuse the slice once Append or AppendAsync
	// returns. During replay it points into a buffer that is reused for the
	// next record: copy what must outlive the callback.
	Data []byte
}

// A record on disk is a frame:
//
//	offset size field
//	0      4    CRC-32C (Castagnoli) of bytes 4 .. end of frame
//	4      4    length of Data (little endian)
//	8      1    Kind
//	9      8    Key (little endian)
//	17     n    Data
//
// The checksum covers the length, so a torn or flipped length is caught by
// the checksum as long as the reader refuses lengths that run past the end
// of the file (it does: see scanSegment) instead of trusting them to size a
// buffer.
const frameHeaderSize = 17

// castagnoli is the CRC-32C table; hash/crc32 uses the SSE4.2/ARMv8
// instructions for it, so checksumming costs far less than the write.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameSize returns the bytes a record with n bytes of Data takes on disk.
func frameSize(n int) int64 { return frameHeaderSize + int64(n) }

// appendFrame appends the frame of r to dst.
func appendFrame(dst []byte, r Record) []byte {
	start := len(dst)
	var h [frameHeaderSize]byte
	binary.LittleEndian.PutUint32(h[4:], uint32(len(r.Data)))
	h[8] = byte(r.Kind)
	binary.LittleEndian.PutUint64(h[9:], r.Key)
	dst = append(dst, h[:]...)
	dst = append(dst, r.Data...)
	binary.LittleEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+4:], castagnoli))
	return dst
}

// frameHeader is a decoded, not yet verified, frame header.
type frameHeader struct {
	crc  uint32
	n    uint32
	kind Kind
	key  uint64
}

func parseFrameHeader(h []byte) frameHeader {
	return frameHeader{
		crc:  binary.LittleEndian.Uint32(h[0:]),
		n:    binary.LittleEndian.Uint32(h[4:]),
		kind: Kind(h[8]),
		key:  binary.LittleEndian.Uint64(h[9:]),
	}
}

// verify reports whether data matches the header's checksum. hdr is the
// raw 17-byte header the fields were parsed from.
func (fh frameHeader) verify(hdr, data []byte) bool {
	c := crc32.Update(0, castagnoli, hdr[4:frameHeaderSize])
	c = crc32.Update(c, castagnoli, data)
	return c == fh.crc
}
