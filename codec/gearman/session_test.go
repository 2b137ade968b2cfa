package gearman

import (
	"bytes"
	"io"
	"testing"
)

// exampleSession is the "Binary Protocol Example" of the protocol document,
// every byte as printed there, in order.
var exampleSession = []struct {
	dir  string // who sends it
	hex  string
	want string // Packet.String of the decoded packet
}{
	{"worker", `00 52 45 51  00 00 00 01  00 00 00 07  72 65 76 65 72 73 65`, `REQ CAN_DO ["reverse"]`},
	{"worker", `00 52 45 51  00 00 00 09  00 00 00 00`, `REQ GRAB_JOB []`},
	{"server", `00 52 45 53  00 00 00 0a  00 00 00 00`, `RES NO_JOB []`},
	{"worker", `00 52 45 51  00 00 00 04  00 00 00 00`, `REQ PRE_SLEEP []`},
	{"client", `00 52 45 51  00 00 00 07  00 00 00 0d  72 65 76 65 72 73 65 00  00  74 65 73 74`, `REQ SUBMIT_JOB ["reverse" "" "test"]`},
	{"server", `00 52 45 53  00 00 00 08  00 00 00 07  48 3a 6c 61 70 3a 31`, `RES JOB_CREATED ["H:lap:1"]`},
	{"server", `00 52 45 53  00 00 00 06  00 00 00 00`, `RES NOOP []`},
	{"worker", `00 52 45 51  00 00 00 09  00 00 00 00`, `REQ GRAB_JOB []`},
	{"server", `00 52 45 53  00 00 00 0b  00 00 00 14  48 3a 6c 61 70 3a 31 00  72 65 76 65 72 73 65 00  74 65 73 74`, `RES JOB_ASSIGN ["H:lap:1" "reverse" "test"]`},
	{"worker", `00 52 45 51  00 00 00 0d  00 00 00 0c  48 3a 6c 61 70 3a 31 00  74 73 65 74`, `REQ WORK_COMPLETE ["H:lap:1" "tset"]`},
	{"server", `00 52 45 53  00 00 00 0d  00 00 00 0c  48 3a 6c 61 70 3a 31 00  74 73 65 74`, `RES WORK_COMPLETE ["H:lap:1" "tset"]`},
}

// TestExampleSession decodes the document's session packet by packet and as
// one stream, and re-encodes every packet three ways to the same bytes.
func TestExampleSession(t *testing.T) {
	var stream []byte
	for i, step := range exampleSession {
		wire := unhex(t, step.hex)
		stream = append(stream, wire...)

		var p Packet
		if err := p.UnmarshalBinary(wire); err != nil {
			t.Fatalf("step %d (%s): UnmarshalBinary: %v", i, step.dir, err)
		}
		if got := p.String(); got != step.want {
			t.Errorf("step %d: decoded %s, want %s", i, got, step.want)
		}
		if got := p.AppendTo(nil); !bytes.Equal(got, wire) {
			t.Errorf("step %d: AppendTo = % x, want % x", i, got, wire)
		}
		if got, err := p.MarshalBinary(); err != nil || !bytes.Equal(got, wire) {
			t.Errorf("step %d: MarshalBinary = % x, %v", i, got, err)
		}
		var out bytes.Buffer
		w := NewWriter(&out)
		if err := w.WritePacket(p.Magic, p.Type, p.Args...); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), wire) {
			t.Errorf("step %d: WritePacket = % x, want % x", i, out.Bytes(), wire)
		}
	}

	// The whole session through one Reader, re-encoded through one Writer.
	r := NewReader(bytes.NewReader(stream), Limits{})
	var out bytes.Buffer
	w := NewWriter(&out)
	for i, step := range exampleSession {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got := f.String(); got != step.want {
			t.Errorf("frame %d: %s, want %s", i, got, step.want)
		}
		if err := w.WriteFrame(&f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after the session: %v, want io.EOF", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), stream) {
		t.Errorf("re-encoded session differs:\n got % x\nwant % x", out.Bytes(), stream)
	}

	checkSplits(t, stream, Limits{}, true)
}

// TestExampleSessionAccessors checks the typed accessors on the session's
// packets.
func TestExampleSessionAccessors(t *testing.T) {
	var submit, assign, complete Packet
	for _, c := range []struct {
		p   *Packet
		hex string
	}{
		{&submit, exampleSession[4].hex},
		{&assign, exampleSession[8].hex},
		{&complete, exampleSession[9].hex},
	} {
		if err := c.p.UnmarshalBinary(unhex(t, c.hex)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string, got []byte, want string) {
		t.Helper()
		if string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	check("submit.Function", submit.Function(), "reverse")
	check("submit.Unique", submit.Unique(), "")
	check("submit.Data", submit.Data(), "test")
	if submit.Handle() != nil {
		t.Errorf("submit.Handle = %q, want nil", submit.Handle())
	}
	check("assign.Handle", assign.Handle(), "H:lap:1")
	check("assign.Function", assign.Function(), "reverse")
	check("assign.Data", assign.Data(), "test")
	if assign.Unique() != nil {
		t.Errorf("JOB_ASSIGN has no unique, got %q", assign.Unique())
	}
	check("complete.Handle", complete.Handle(), "H:lap:1")
	check("complete.Data", complete.Data(), "tset")
}
