package gearman

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

var echoNext = req(16, "next")

const echoNextEvent = `REQ ECHO_REQ ["next"]`

// TestReaderErrors feeds each kind of bad input, followed by a good frame,
// and checks the error, its blast radius, and that a non-fatal error leaves
// the Reader in sync for the next frame. Each stream is also decoded split
// at every byte.
func TestReaderErrors(t *testing.T) {
	h64 := strings.Repeat("h", 64)
	h63 := h64[:63]
	u65 := strings.Repeat("u", 65)
	u64 := u65[:64]
	small := Limits{MaxPacketSize: 32, MaxLineSize: 16}
	for _, c := range []struct {
		name  string
		lim   Limits
		in    []byte
		err   error // sentinel of the first event, nil if none
		fatal bool
		want  []string
	}{
		{
			name: "bad magic", in: cat([]byte("\x00REX\x00\x00\x00\x10\x00\x00\x00\x00"), echoNext),
			err: ErrBadMagic, fatal: true,
			want: []string{`ERR gearman: bad magic fatal=true code=INVALID_MAGIC text="Invalid magic value" frame=NONE`},
		},
		{
			name: "bad magic early", in: []byte("\x00XYZ"), // decided before a full header arrives
			err: ErrBadMagic, fatal: true,
			want: []string{`ERR gearman: bad magic fatal=true code=INVALID_MAGIC text="Invalid magic value" frame=NONE`},
		},
		{
			name: "unknown type skipped", in: cat(req(99, "xx\x00yy"), echoNext),
			err:  ErrUnknownType,
			want: []string{`ERR gearman: unknown packet type fatal=false code=INVALID_COMMAND text="Invalid command expected" frame=NONE`, echoNextEvent},
		},
		{
			name: "type 0", in: cat(res(0, ""), echoNext),
			err:  ErrUnknownType,
			want: []string{`ERR gearman: unknown packet type fatal=false code=INVALID_COMMAND text="Invalid command expected" frame=NONE`, echoNextEvent},
		},
		{
			name: "type 5 (unused)", in: cat(req(5, "abc"), echoNext),
			err:  ErrUnknownType,
			want: []string{`ERR gearman: unknown packet type fatal=false code=INVALID_COMMAND text="Command not expected" frame=NONE`, echoNextEvent},
		},
		{
			name: "too large skipped", lim: small, in: cat(req(7, "fn\x00u\x00"+strings.Repeat("d", 40)), echoNext),
			err:  ErrTooLarge,
			want: []string{`ERR gearman: packet too large fatal=false code=ARGUMENT_TOO_LARGE text="Packet too large" frame=NONE`, echoNextEvent},
		},
		{
			name: "at the size limit", lim: small, in: cat(req(16, strings.Repeat("d", 32)), echoNext),
			want: []string{`REQ ECHO_REQ ["` + strings.Repeat("d", 32) + `"]`, echoNextEvent},
		},
		{
			name: "too few args, none", in: cat(req(7, "fnonly"), echoNext),
			err:  ErrTooFewArgs,
			want: []string{`ERR gearman: too few arguments fatal=false code=INVALID_PACKET text="Too few arguments" frame=NONE`, echoNextEvent},
		},
		{
			name: "too few args, one short", in: cat(req(36, "fn\x00u\x00data"), echoNext),
			err:  ErrTooFewArgs,
			want: []string{`ERR gearman: too few arguments fatal=false code=INVALID_PACKET text="Too few arguments" frame=NONE`, echoNextEvent},
		},
		{
			name: "too few args, empty body", in: cat(res(20, ""), echoNext),
			err:  ErrTooFewArgs,
			want: []string{`ERR gearman: too few arguments fatal=false code=INVALID_PACKET text="Too few arguments" frame=NONE`, echoNextEvent},
		},
		{
			name: "body of an argument-less type ignored", in: cat(req(9, "junk"), echoNext), // as gearmand
			want: []string{`REQ GRAB_JOB []`, echoNextEvent},
		},
		{
			name: "line too long, end not yet read", lim: small, in: cat([]byte(strings.Repeat("L", 5000)+"\r\n"), echoNext),
			err:  ErrLineTooLong,
			want: []string{`ERR gearman: admin line too long fatal=false code=ARGUMENT_TOO_LARGE text="Line too long" frame=NONE`, echoNextEvent},
		},
		{
			name: "line too long, end buffered", lim: small, in: cat([]byte(strings.Repeat("L", 17)+"\n"), []byte("status\n")),
			err:  ErrLineTooLong,
			want: []string{`ERR gearman: admin line too long fatal=false code=ARGUMENT_TOO_LARGE text="Line too long" frame=NONE`, `TEXT "status"`},
		},
		{
			name: "line at the limit", lim: small, in: []byte(strings.Repeat("L", 14) + "\r\n"),
			want: []string{`TEXT "` + strings.Repeat("L", 14) + `" CRLF`},
		},
		{
			name: "line too long, never ends", lim: small, in: []byte(strings.Repeat("L", 100)),
			err:  ErrLineTooLong,
			want: []string{`ERR gearman: admin line too long fatal=false code=ARGUMENT_TOO_LARGE text="Line too long" frame=NONE`, `ERR unexpected EOF`},
		},
		{
			name: "handle too long", in: cat(req(15, h64), echoNext),
			err:  ErrHandleTooLong,
			want: []string{`ERR gearman: job handle too long fatal=false code=ARGUMENT_TOO_LARGE text="Job handle too large" frame=REQ GET_STATUS ["` + h64 + `"]`, echoNextEvent},
		},
		{
			name: "handle too long in WORK_FAIL", in: cat(req(14, h64), echoNext),
			err:  ErrHandleTooLong,
			want: []string{`ERR gearman: job handle too long fatal=false code=ARGUMENT_TOO_LARGE text="` + TextHandleTooLargeWorkFail + `" frame=REQ WORK_FAIL ["` + h64 + `"]`, echoNextEvent},
		},
		{
			name: "handle at the limit", in: cat(req(13, h63+"\x00r"), echoNext),
			want: []string{`REQ WORK_COMPLETE ["` + h63 + `" "r"]`, echoNextEvent},
		},
		{
			name: "long handle in a response is not checked", in: res(8, h64+h64),
			want: []string{`RES JOB_CREATED ["` + h64 + h64[:0] + `"...128B]`},
		},
		{
			name: "handle check disabled", lim: Limits{MaxHandleSize: -1}, in: req(15, h64),
			want: []string{`REQ GET_STATUS ["` + h64 + `"]`},
		},
		{
			name: "unique too long", in: cat(req(7, "fn\x00"+u65+"\x00d"), echoNext),
			err:  ErrUniqueTooLong,
			want: []string{`ERR gearman: unique ID too long fatal=false code=ARGUMENT_TOO_LARGE text="Unique value too large" frame=REQ SUBMIT_JOB ["fn" "` + u65[:64] + `"...65B "d"]`, echoNextEvent},
		},
		{
			name: "unique too long in reduce job", in: req(37, "fn\x00"+u65+"\x00red\x00\x00d"),
			err:  ErrUniqueTooLong,
			want: []string{`ERR gearman: unique ID too long fatal=false code=ARGUMENT_TOO_LARGE text="Unique value too large" frame=REQ SUBMIT_REDUCE_JOB ["fn" "` + u65[:64] + `"...65B "red" "" "d"]`},
		},
		{
			name: "unique too long in GET_STATUS_UNIQUE", in: req(41, u65),
			err:  ErrUniqueTooLong,
			want: []string{`ERR gearman: unique ID too long fatal=false code=ARGUMENT_TOO_LARGE text="Unique value too large" frame=REQ GET_STATUS_UNIQUE ["` + u65[:64] + `"...65B]`},
		},
		{
			name: "unique at the limit", in: req(18, "fn\x00"+u64+"\x00d"),
			want: []string{`REQ SUBMIT_JOB_BG ["fn" "` + u64 + `" "d"]`},
		},
		{
			name: "EOF in header", in: req(16, "x")[:7],
			want: []string{`ERR unexpected EOF`},
		},
		{
			name: "EOF in body", in: req(16, "xyz")[:13],
			want: []string{`ERR unexpected EOF`},
		},
		{
			name: "EOF in a skipped body", lim: small, in: req(16, strings.Repeat("d", 40))[:20],
			err:  ErrTooLarge,
			want: []string{`ERR gearman: packet too large fatal=false code=ARGUMENT_TOO_LARGE text="Packet too large" frame=NONE`, `ERR unexpected EOF`},
		},
		{
			name: "errors back to back", lim: small, in: cat(req(99, ""), req(16, strings.Repeat("d", 33)), []byte(strings.Repeat("L", 20)+"\n"), req(7, "x"), echoNext),
			err: ErrUnknownType,
			want: []string{
				`ERR gearman: unknown packet type fatal=false code=INVALID_COMMAND text="Invalid command expected" frame=NONE`,
				`ERR gearman: packet too large fatal=false code=ARGUMENT_TOO_LARGE text="Packet too large" frame=NONE`,
				`ERR gearman: admin line too long fatal=false code=ARGUMENT_TOO_LARGE text="Line too long" frame=NONE`,
				`ERR gearman: too few arguments fatal=false code=INVALID_PACKET text="Too few arguments" frame=NONE`,
				echoNextEvent,
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := decodeAll(bytes.NewReader(c.in), c.lim)
			if !equalStrings(got, c.want) {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if c.err != nil {
				_, err := NewReader(bytes.NewReader(c.in), c.lim).ReadFrame()
				if !errors.Is(err, c.err) {
					t.Errorf("errors.Is(%v, %v) = false", err, c.err)
				}
				if IsFatal(err) != c.fatal {
					t.Errorf("IsFatal = %v, want %v", IsFatal(err), c.fatal)
				}
			}
			checkSplits(t, c.in, c.lim, len(c.in) < 600)
		})
	}
}

// TestFatalIsSticky: after a fatal error the Reader does not try to make
// sense of what follows.
func TestFatalIsSticky(t *testing.T) {
	r := NewReader(bytes.NewReader(cat([]byte("\x00RE?\x00\x00\x00\x00\x00\x00\x00\x00"), echoNext)), Limits{})
	_, err1 := r.ReadFrame()
	_, err2 := r.ReadFrame()
	if !errors.Is(err1, ErrBadMagic) || err2 != err1 {
		t.Fatalf("got %v then %v", err1, err2)
	}
}

// errReader fails the test if read: proves an error came before the body.
type errReader struct{ t *testing.T }

func (e errReader) Read([]byte) (int, error) {
	e.t.Fatal("read past the header of a rejected packet")
	return 0, nil
}

// TestRejectBeforeReading: an oversized or unknown packet is reported from
// its header alone, with no buffer growth and no wait for its body.
func TestRejectBeforeReading(t *testing.T) {
	for _, hdr := range [][]byte{
		raw("\x00REQ", 7, "")[:8],  // SUBMIT_JOB ...
		raw("\x00REQ", 99, "")[:8], // unknown type ...
	} {
		hdr = append(hdr, 0xff, 0xff, 0xff, 0xff) // ... of 4 GiB-1
		r := NewReader(io.MultiReader(bytes.NewReader(hdr), errReader{t}), Limits{})
		_, err := r.ReadFrame()
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Fatal || pe.Size != 0xffffffff {
			t.Fatalf("got %v", err)
		}
		if len(r.buf) != minBufSize {
			t.Errorf("buffer grew to %d", len(r.buf))
		}
	}
}

// timeoutReader returns its data in pieces with an error between them, as a
// net.Conn with a read deadline does.
type timeoutReader struct {
	steps []any // []byte or error
}

var errTimeout = errors.New("i/o timeout")

func (tr *timeoutReader) Read(p []byte) (int, error) {
	if len(tr.steps) == 0 {
		return 0, io.EOF
	}
	s := tr.steps[0]
	tr.steps = tr.steps[1:]
	if err, ok := s.(error); ok {
		return 0, err
	}
	return copy(p, s.([]byte)), nil
}

// TestResumeAfterReadError: a read error mid-frame is returned, and the next
// call finishes the frame where it stopped.
func TestResumeAfterReadError(t *testing.T) {
	submit := req(7, "fn\x00u\x00data")
	long := []byte(strings.Repeat("L", 40) + "\n")
	tr := &timeoutReader{steps: []any{
		submit[:5], errTimeout, submit[5:14], errTimeout, submit[14:],
		long[:3], errTimeout, long[3:],
		req(16, strings.Repeat("s", 40))[:15], errTimeout, req(16, strings.Repeat("s", 40))[15:],
		echoNext,
	}}
	r := NewReader(tr, Limits{MaxPacketSize: 20, MaxLineSize: 10})
	var got []string
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if errors.Is(err, errTimeout) {
			got = append(got, "timeout")
			continue
		}
		got = append(got, event(f, err))
		if IsFatal(err) {
			break
		}
	}
	want := []string{
		"timeout", "timeout", `REQ SUBMIT_JOB ["fn" "u" "data"]`,
		"timeout", `ERR gearman: admin line too long fatal=false code=ARGUMENT_TOO_LARGE text="Line too long" frame=NONE`,
		`ERR gearman: packet too large fatal=false code=ARGUMENT_TOO_LARGE text="Packet too large" frame=NONE`, "timeout",
		echoNextEvent,
	}
	if !equalStrings(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestNoProgress(t *testing.T) {
	if _, err := NewReader(zeroReader{}, Limits{}).ReadFrame(); err != io.ErrNoProgress {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}

func TestIsFatal(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{&ProtocolError{Err: ErrBadMagic, Fatal: true}, true},
		{&ProtocolError{Err: ErrTooLarge}, false},
		{errors.Join(errors.New("ctx"), &ProtocolError{Err: ErrTooFewArgs}), false},
	} {
		if got := IsFatal(c.err); got != c.want {
			t.Errorf("IsFatal(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestProtocolErrorMessages(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		lim  Limits
		want string
	}{
		{[]byte("\x00REZ\x00\x00\x00\x01\x00\x00\x00\x00"), Limits{}, "gearman: bad magic; stream out of sync"},
		{req(77, "abc"), Limits{}, "gearman: unknown packet type (REQ Type(77)); body of 3 bytes skipped"},
		{req(7, strings.Repeat("x", 50)), Limits{MaxPacketSize: 10}, "gearman: packet too large (REQ SUBMIT_JOB): 50 bytes, limit 10; body of 50 bytes skipped"},
		{req(7, "fn\x00u"), Limits{}, "gearman: too few arguments (REQ SUBMIT_JOB): 2 of 3"},
		{[]byte(strings.Repeat("x", 30)), Limits{MaxLineSize: 20}, "gearman: admin line too long: 30 bytes, limit 20"},
		{req(15, strings.Repeat("h", 70)), Limits{}, "gearman: job handle too long (REQ GET_STATUS): 70 bytes, limit 63"},
		{req(7, "f\x00"+strings.Repeat("u", 65)+"\x00"), Limits{}, "gearman: unique ID too long (REQ SUBMIT_JOB): 65 bytes, limit 64"},
	} {
		_, err := NewReader(bytes.NewReader(c.in), c.lim).ReadFrame()
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestErrorReplyIsGearmands: the engine answers a codec error with the
// exact ERROR packet gearmand sends (captured from gearmand 1.1.20), and the
// connection goes on.
func TestErrorReplyIsGearmands(t *testing.T) {
	in := cat(req(7, "f\x00"+strings.Repeat("u", 65)+"\x00d"), echoNext)
	r := NewReader(bytes.NewReader(in), Limits{})
	var out bytes.Buffer
	w := NewWriter(&out)
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		var pe *ProtocolError
		if errors.As(err, &pe) && !pe.Fatal {
			if err := w.WriteError(pe.Code, pe.Text); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Packet.Type == EchoReq {
			if err := w.WritePacket(Res, EchoRes, f.Packet.Data()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := cat([]byte("\x00RES\x00\x00\x00\x13\x00\x00\x00)ARGUMENT_TOO_LARGE\x00Unique value too large"), res(17, "next"))
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("replies\n%q\nwant\n%q", out.Bytes(), want)
	}
}

func TestUnmarshalBinaryErrors(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want error
	}{
		{req(16, "x")[:11], io.ErrUnexpectedEOF},
		{req(16, "xyz")[:14], io.ErrUnexpectedEOF},
		{[]byte("\x00REQ\x00\x00\x00\x10\x00\x00\x00\x00"), nil},
		{[]byte("xREQ\x00\x00\x00\x10\x00\x00\x00\x00"), ErrBadMagic},
		{req(50, ""), ErrUnknownType},
		{req(7, "fn"), ErrTooFewArgs},
	} {
		var p Packet
		err := p.UnmarshalBinary(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%q: got %v, want %v", c.in, err, c.want)
		}
	}
	var p Packet
	if err := p.UnmarshalBinary(append(req(16, "x"), 'y')); err == nil || !strings.Contains(err.Error(), "1 bytes after the packet") {
		t.Errorf("trailing byte: %v", err)
	}
}
