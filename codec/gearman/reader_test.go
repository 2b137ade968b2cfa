package gearman

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// sampleArg returns a value for one argument meaning. Data (and whatever
// argument is last) carries NUL bytes: the last argument is sized by the
// packet length and may contain them.
func sampleArg(f Field, last bool) string {
	var s string
	switch f {
	case FieldFunction:
		s = "reverse"
	case FieldUnique:
		s = "uniq-1"
	case FieldHandle:
		s = "H:lap:1"
	case FieldData:
		s = "da\x00ta"
	case FieldCode:
		s = "QUEUE_ERROR"
	case FieldText:
		s = "Job queue is full"
	default:
		s = f.String()
	}
	if last {
		s += "\x00tail"
	}
	return s
}

// allTypes returns, for every valid type, the sample arguments and the frame
// built by hand with the direction the protocol uses.
func allTypes() (typesOut []Type, argsOut [][]string, frames [][]byte) {
	for typ := Type(1); typ <= StatusResUnique; typ++ {
		if !typ.Valid() {
			continue
		}
		n := typ.NumArgs()
		args := make([]string, n)
		for i := range args {
			args[i] = sampleArg(typ.ArgField(i), i == n-1)
		}
		magic := "\x00REQ"
		if !typ.SentWith(Req) {
			magic = "\x00RES"
		}
		typesOut = append(typesOut, typ)
		argsOut = append(argsOut, args)
		frames = append(frames, raw(magic, uint32(typ), strings.Join(args, "\x00")))
	}
	return
}

func toBytes(ss []string) [][]byte {
	b := make([][]byte, len(ss))
	for i, s := range ss {
		b[i] = []byte(s)
	}
	return b
}

func TestEveryType(t *testing.T) {
	typs, args, frames := allTypes()
	if len(typs) != 41 {
		t.Fatalf("%d types, want 41 (1-4, 6-42)", len(typs))
	}
	var stream []byte
	for i, typ := range typs {
		stream = append(stream, frames[i]...)
		r := NewReader(bytes.NewReader(frames[i]), Limits{})
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if f.Kind != KindPacket || f.Packet.Type != typ {
			t.Fatalf("%s: decoded %s", typ, f.String())
		}
		if len(f.Packet.Args) != len(args[i]) {
			t.Fatalf("%s: %d args, want %d", typ, len(f.Packet.Args), len(args[i]))
		}
		for j, a := range f.Packet.Args {
			if string(a) != args[i][j] {
				t.Errorf("%s: arg %d = %q, want %q", typ, j, a, args[i][j])
			}
		}
		// Byte-exact re-encoding, by each encoder.
		if got := AppendPacket(nil, f.Packet.Magic, typ, toBytes(args[i])...); !bytes.Equal(got, frames[i]) {
			t.Errorf("%s: AppendPacket = %q, want %q", typ, got, frames[i])
		}
		if got := f.AppendTo(nil); !bytes.Equal(got, frames[i]) {
			t.Errorf("%s: Frame.AppendTo = %q, want %q", typ, got, frames[i])
		}
		if _, err := r.ReadFrame(); err != io.EOF {
			t.Errorf("%s: trailing read: %v", typ, err)
		}
	}
	checkSplits(t, stream, Limits{}, true)
}

// TestGoldenBytes pins a few encodings byte by byte, including gearmand's
// own ERROR and STATUS_RES_UNIQUE as captured from a running gearmand.
func TestGoldenBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Magic
		typ  Type
		args []string
		hex  string
	}{
		{"unique too large", Res, Error, []string{"ARGUMENT_TOO_LARGE", "Unique value too large"},
			`00524553 00000013 00000029 415247554d454e545f544f4f5f4c41524745 00 556e697175652076616c756520746f6f206c61726765`},
		{"status unknown handle", Res, StatusRes, []string{"x", "0", "0", "0", "0"},
			`00524553 00000014 00000009 78 00 30 00 30 00 30 00 30`},
		{"reduce job", Req, SubmitReduceJob, []string{"map", "u", "red", "", "w"},
			`00524551 00000025 0000000c 6d6170 00 75 00 726564 00 00 77`},
		{"assign all", Res, JobAssignAll, []string{"H:a:1", "map", "u", "red", "w"},
			`00524553 00000028 00000011 483a613a31 00 6d6170 00 75 00 726564 00 77`},
		{"status res unique", Res, StatusResUnique, []string{"u", "1", "1", "2", "4", "3"},
			`00524553 0000002a 0000000b 75 00 31 00 31 00 32 00 34 00 33`},
		{"grab job all", Req, GrabJobAll, []string{}, `00524551 00000027 00000000`},
	} {
		want := unhex(t, c.hex)
		if got := AppendPacket(nil, c.m, c.typ, toBytes(c.args)...); !bytes.Equal(got, want) {
			t.Errorf("%s: encoded % x, want % x", c.name, got, want)
		}
		var p Packet
		if err := p.UnmarshalBinary(want); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Magic != c.m || p.Type != c.typ || len(p.Args) != len(c.args) {
			t.Fatalf("%s: decoded %s", c.name, p.String())
		}
		for i := range c.args {
			if string(p.Args[i]) != c.args[i] {
				t.Errorf("%s: arg %d = %q, want %q", c.name, i, p.Args[i], c.args[i])
			}
		}
	}
}

func TestAdminLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"status\n", []string{`TEXT "status"`}},
		{"workers\r\n", []string{`TEXT "workers" CRLF`}},
		{"maxqueue fn 10\n", []string{`TEXT "maxqueue fn 10"`}},
		{"maxqueue fn 1 2 3\r\n", []string{`TEXT "maxqueue fn 1 2 3" CRLF`}},
		{"show jobs\nshow unique jobs\n", []string{`TEXT "show jobs"`, `TEXT "show unique jobs"`}},
		{"cancel job H:lap:1\r\n", []string{`TEXT "cancel job H:lap:1" CRLF`}},
		{"\n", []string{`TEXT ""`}},
		{"\r\n", []string{`TEXT "" CRLF`}},
		{"status\r\r\n", []string{`TEXT "status\r" CRLF`}}, // one "\r" is stripped, as gearmand does
		{"a\x00b\n", []string{`TEXT "a\x00b"`}},            // NUL inside a line is text
		{"version", []string{"ERR unexpected EOF"}},
	} {
		got := decodeAll(strings.NewReader(c.in), Limits{})
		if !equalStrings(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
		checkSplits(t, []byte(c.in), Limits{}, true)
	}
}

// TestMixed interleaves binary packets and admin lines on one stream, as
// gearmand allows.
func TestMixed(t *testing.T) {
	stream := cat(
		[]byte("status\n"),
		req(16, "ping"),
		[]byte("workers\r\n"),
		req(7, "fn\x00\x00data"),
		req(9, ""),
		[]byte("version\n"),
		res(13, "H:1\x00result"),
	)
	want := []string{
		`TEXT "status"`,
		`REQ ECHO_REQ ["ping"]`,
		`TEXT "workers" CRLF`,
		`REQ SUBMIT_JOB ["fn" "" "data"]`,
		`REQ GRAB_JOB []`,
		`TEXT "version"`,
		`RES WORK_COMPLETE ["H:1" "result"]`,
	}
	if got := decodeAll(bytes.NewReader(stream), Limits{}); !equalStrings(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkSplits(t, stream, Limits{}, true)

	// Re-encoding every frame reproduces the stream byte for byte.
	r := NewReader(bytes.NewReader(stream), Limits{})
	var out bytes.Buffer
	w := NewWriterSize(&out, 64)
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteFrame(&f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), stream) {
		t.Errorf("re-encoded:\n%q\nwant\n%q", out.Bytes(), stream)
	}
}

// TestLargeFrames makes the buffer grow, compact and shrink back.
func TestLargeFrames(t *testing.T) {
	big := strings.Repeat("x", 3*minBufSize+17)
	huge := strings.Repeat("y", maxIdleBuf+5)
	stream := cat(
		req(16, "small"),
		req(7, "fn\x00u\x00"+big),
		[]byte("status\n"),
		res(11, "H:1\x00fn\x00"+big),
		req(16, huge),
		req(16, "after"),
	)
	want := []string{
		`REQ ECHO_REQ ["small"]`,
		(&Packet{Magic: Req, Type: SubmitJob, Args: toBytes([]string{"fn", "u", big})}).String(),
		`TEXT "status"`,
		(&Packet{Magic: Res, Type: JobAssign, Args: toBytes([]string{"H:1", "fn", big})}).String(),
		(&Packet{Magic: Req, Type: EchoReq, Args: toBytes([]string{huge})}).String(),
		`REQ ECHO_REQ ["after"]`,
	}
	if got := decodeAll(bytes.NewReader(stream), Limits{}); !equalStrings(got, want) {
		t.Fatalf("got %q", got)
	}
	checkSplits(t, stream, Limits{}, false)

	// The buffer gives its memory back once the huge frame is consumed.
	r := NewReader(bytes.NewReader(cat(req(16, huge), req(16, "a"), req(16, "b"))), Limits{})
	for i := 0; i < 2; i++ {
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.buf) != minBufSize {
		t.Errorf("buffer is %d bytes after a huge frame, want %d", len(r.buf), minBufSize)
	}

	// Full data checks on the big frame (String shortens it).
	r = NewReader(bytes.NewReader(req(7, "fn\x00u\x00"+big)), Limits{})
	f, err := r.ReadFrame()
	if err != nil || string(f.Packet.Data()) != big {
		t.Fatalf("big SUBMIT_JOB: %v", err)
	}
}

// TestReset reuses a Reader for a second connection.
func TestReset(t *testing.T) {
	r := NewReader(strings.NewReader("\x00XXXXXXXXXXX"), Limits{MaxLineSize: 10})
	if _, err := r.ReadFrame(); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("got %v", err)
	}
	r.Reset(strings.NewReader("status\n"))
	f, err := r.ReadFrame()
	if err != nil || string(f.Text) != "status" {
		t.Fatalf("after Reset: %s, %v", f.String(), err)
	}
	if r.Limits().MaxLineSize != 10 || r.Limits().MaxPacketSize != DefaultMaxPacketSize {
		t.Errorf("limits after Reset: %+v", r.Limits())
	}
}

func TestBuffered(t *testing.T) {
	stream := cat(req(16, "a"), []byte("status\n"))
	r := NewReader(bytes.NewReader(stream), Limits{})
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if got := r.Buffered(); got != len("status\n") {
		t.Errorf("Buffered = %d after the first frame, want %d", got, len("status\n"))
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if got := r.Buffered(); got != 0 {
		t.Errorf("Buffered = %d at the end, want 0", got)
	}
}

func TestLimitsDefaults(t *testing.T) {
	got := NewReader(nil, Limits{}).Limits()
	want := Limits{DefaultMaxPacketSize, DefaultMaxLineSize, DefaultMaxHandleSize, DefaultMaxUniqueSize}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	got = NewReader(nil, Limits{MaxPacketSize: -1, MaxLineSize: -1, MaxHandleSize: -1, MaxUniqueSize: 7}).Limits()
	want = Limits{DefaultMaxPacketSize, DefaultMaxLineSize, -1, 7}
	if got != want {
		t.Errorf("with negatives %+v, want %+v", got, want)
	}
}
