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
