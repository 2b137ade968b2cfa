package gearman

import (
	"bytes"
	"io"
	"testing"
)

// segReader hands out its chunks one Read at a time, as a socket hands
// out segments.
type segReader struct{ chunks [][]byte }

func (c *segReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// TestFrameBuffered checks the answer after each frame of a stream whose
// reads end at a frame boundary, inside a header, inside a body and inside
// a text line.
func TestFrameBuffered(t *testing.T) {
	a := AppendPacket(nil, Res, JobCreated, []byte("H:1"))
	b := AppendPacket(nil, Res, JobCreated, []byte("H:2"))
	c := AppendPacket(nil, Res, EchoRes, bytes.Repeat([]byte("x"), 100))
	line := []byte("status\n")
	stream := [][]byte{
		append(append([]byte{}, a...), b[:5]...), // a, then part of b's header
		append(append([]byte{}, b[5:]...), c[:20]...),
		append(append([]byte{}, c[20:]...), line[:3]...),
		line[3:],
	}
	r := NewReader(&segReader{chunks: stream}, Limits{})
	if r.FrameBuffered() {
		t.Fatal("empty reader: FrameBuffered true")
	}
	// want[i]: whether a whole frame is buffered after the i-th ReadFrame.
	want := []bool{false, false, false, false}
	for i, w := range want {
		if _, err := r.ReadFrame(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got := r.FrameBuffered(); got != w {
			t.Fatalf("after frame %d: FrameBuffered %v, want %v (buffered %d)", i, got, w, r.Buffered())
		}
	}
	// Two whole packets in one read: true between them.
	r = NewReader(bytes.NewReader(append(append([]byte{}, a...), line...)), Limits{})
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if !r.FrameBuffered() {
		t.Fatal("a whole text line buffered: FrameBuffered false")
	}
	r = NewReader(bytes.NewReader(append(append([]byte{}, a...), c...)), Limits{})
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if !r.FrameBuffered() {
		t.Fatal("a whole packet buffered: FrameBuffered false")
	}
}

// TestSpaceFilled: a long stream of frames of every size, some larger
// than the buffer and some bad, decodes the same read through Space and
// Filled in chunks of many sizes (the buffer filling up, moved to the
// front, grown) as read whole.
func TestSpaceFilled(t *testing.T) {
	lim := Limits{MaxPacketSize: 64 << 10, MaxLineSize: 256}
	var stream []byte
	for i := 0; i < 400; i++ {
		switch i % 7 {
		case 0:
			stream = append(stream, "status\n"...)
		case 3:
			stream = append(stream, bytes.Repeat([]byte("L"), 300)...) // a line too long
			stream = append(stream, '\n')
		case 5:
			stream = AppendPacket(stream, Req, SubmitJob, []byte("f"), []byte("u"), bytes.Repeat([]byte{byte(i)}, 5000+i*37))
		default:
			stream = AppendPacket(stream, Req, EchoReq, bytes.Repeat([]byte{byte(i)}, i*3%700))
		}
	}
	whole := decodeAll(bytes.NewReader(stream), lim)
	if len(whole) < 400 {
		t.Fatalf("only %d frames decoded whole", len(whole))
	}
	for seed := 0; seed < 40; seed++ {
		if got := decodeSpace(stream, lim, seed); !equalStrings(got, whole) {
			t.Fatalf("seed %d: %d frames through Space, %d whole", seed, len(got), len(whole))
		}
	}
}

// TestSpaceMovesToFront: when little room is left behind a partial frame
// that still fits, Space moves the unread bytes to the front first.
func TestSpaceMovesToFront(t *testing.T) {
	var stream []byte
	for range 39 { // 3900 bytes
		stream = AppendPacket(stream, Req, EchoReq, bytes.Repeat([]byte("e"), 88))
	}
	last := AppendPacket(nil, Req, EchoReq, bytes.Repeat([]byte("z"), 150))
	stream = append(stream, last...)
	r := NewReader(&spaceFeed{data: []byte("more to come")}, Limits{})
	// The first read ends 50 bytes into the last frame, which fits in the
	// 196 bytes behind its start: decoding does not move it.
	first := 3950
	n := copy(r.Space(), stream[:first])
	r.Filled(n)
	frames := 0
	for {
		f, err := r.ReadFrame()
		if err == errNotRead {
			break
		}
		if err != nil || f.Packet.Type != EchoReq {
			t.Fatalf("frame %d: %v %v", frames, f.String(), err)
		}
		frames++
	}
	space := r.Space()
	if frames != 39 || len(space) != minBufSize-50 {
		t.Fatalf("after %d frames, Space left %d bytes of room behind %d unread", frames, len(space), r.Buffered())
	}
	r.Filled(copy(space, stream[first:]))
	f, err := r.ReadFrame()
	if err != nil || !bytes.Equal(f.Packet.Arg(0), bytes.Repeat([]byte("z"), 150)) {
		t.Fatalf("last frame after the move: %v, %v", f.String(), err)
	}
}
