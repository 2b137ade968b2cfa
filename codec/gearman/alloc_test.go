package gearman

import (
	"io"
	"testing"
)

var (
	benchFunction = []byte("reverse")
	benchUnique   = []byte("uniq-0001")
	benchHandle   = []byte("H:jobgate:12345")
	benchData     = []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" +
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") // 128 bytes

	benchSubmit   = AppendPacket(nil, Req, SubmitJob, benchFunction, benchUnique, benchData)
	benchAssign   = AppendPacket(nil, Res, JobAssign, benchHandle, benchFunction, benchData)
	benchComplete = AppendPacket(nil, Req, WorkComplete, benchHandle, benchData)
	benchAdmin    = []byte("maxqueue reverse 10\r\n")
)

// steadyReader returns a Reader over frame repeated forever, warmed up so
// its buffer has reached its steady size.
func steadyReader(tb testing.TB, frame []byte) *Reader {
	var data []byte
	for len(data) < 64<<10 {
		data = append(data, frame...)
	}
	r := NewReader(&loopReader{data: data}, Limits{})
	for i := 0; i < 100; i++ {
		if _, err := r.ReadFrame(); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// TestSteadyStateAllocs asserts that decoding and encoding allocate nothing
// once buffers are warm. AllocsPerRun counts allocations, so this is
// deterministic, unlike a benchmark.
func TestSteadyStateAllocs(t *testing.T) {
	for name, frame := range map[string][]byte{
		"SUBMIT_JOB": benchSubmit, "JOB_ASSIGN": benchAssign,
		"WORK_COMPLETE": benchComplete, "admin line": benchAdmin,
	} {
		r := steadyReader(t, frame)
		var sink int
		allocs := testing.AllocsPerRun(1000, func() {
			f, err := r.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			sink += len(f.Packet.Handle()) + len(f.Packet.Function()) + len(f.Packet.Unique()) +
				len(f.Packet.Data()) + len(f.Text)
		})
		if allocs != 0 {
			t.Errorf("decode %s: %v allocs/op, want 0", name, allocs)
		}
	}

	w := NewWriterSize(io.Discard, 64<<10)
	var f Frame
	if err := f.Packet.UnmarshalBinary(benchAssign); err != nil {
		t.Fatal(err)
	}
	f.Kind = KindPacket
	text := Frame{Kind: KindText, Text: []byte("status"), CRLF: true}
	dst := make([]byte, 0, 1024)
	words := make([][]byte, 0, MaxAdminFields+1)
	for name, fn := range map[string]func(){
		"WritePacket SUBMIT_JOB": func() { w.WritePacket(Req, SubmitJob, benchFunction, benchUnique, benchData) },
		"WritePacket JOB_ASSIGN": func() { w.WritePacket(Res, JobAssign, benchHandle, benchFunction, benchData) },
		"WritePacket NOOP":       func() { w.WritePacket(Res, Noop) },
		"WriteFrame packet":      func() { w.WriteFrame(&f) },
		"WriteFrame text":        func() { w.WriteFrame(&text) },
		"WriteError":             func() { w.WriteError(CodeQueueError, TextJobQueueFull) },
		"WriteText":              func() { w.WriteText(benchAdmin) },
		"WriteString":            func() { w.WriteString(AdminOK) },
		"AppendPacket":           func() { dst = AppendPacket(dst[:0], Req, WorkComplete, benchHandle, benchData) },
		"Frame.AppendTo":         func() { dst = f.AppendTo(dst[:0]) },
		"AppendAdminFields":      func() { words = AppendAdminFields(words[:0], benchAdmin) },
		"UnmarshalBinary":        func() { f.Packet.UnmarshalBinary(benchSubmit) },
	} {
		if allocs := testing.AllocsPerRun(1000, fn); allocs != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, allocs)
		}
	}
}

func benchDecode(b *testing.B, frame []byte) {
	r := steadyReader(b, frame)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := r.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSubmitJob(b *testing.B)    { benchDecode(b, benchSubmit) }
func BenchmarkDecodeJobAssign(b *testing.B)    { benchDecode(b, benchAssign) }
func BenchmarkDecodeWorkComplete(b *testing.B) { benchDecode(b, benchComplete) }
func BenchmarkDecodeAdminLine(b *testing.B)    { benchDecode(b, benchAdmin) }

func benchWrite(b *testing.B, size int, write func(w *Writer)) {
	w := NewWriter(io.Discard)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		write(w)
	}
	w.Flush()
}

func BenchmarkEncodeSubmitJob(b *testing.B) {
	benchWrite(b, len(benchSubmit), func(w *Writer) { w.WritePacket(Req, SubmitJob, benchFunction, benchUnique, benchData) })
}

func BenchmarkEncodeJobAssign(b *testing.B) {
	benchWrite(b, len(benchAssign), func(w *Writer) { w.WritePacket(Res, JobAssign, benchHandle, benchFunction, benchData) })
}

func BenchmarkEncodeWorkComplete(b *testing.B) {
	benchWrite(b, len(benchComplete), func(w *Writer) { w.WritePacket(Req, WorkComplete, benchHandle, benchData) })
}

func BenchmarkEncodeAdminLine(b *testing.B) {
	benchWrite(b, len(benchAdmin), func(w *Writer) { w.WriteText(benchAdmin) })
}

func BenchmarkAppendPacketJobAssign(b *testing.B) {
	dst := make([]byte, 0, 1024)
	b.SetBytes(int64(len(benchAssign)))
	b.ReportAllocs()
	for range b.N {
		dst = AppendPacket(dst[:0], Res, JobAssign, benchHandle, benchFunction, benchData)
	}
}
