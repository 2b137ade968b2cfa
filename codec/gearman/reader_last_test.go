package gearman

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestLastPacket: LastPacket is the exact wire bytes of the packet
// ReadFrame returned, nil after a text frame or a frame-less error, and
// encoding the decoded packet again gives the same bytes.
func TestLastPacket(t *testing.T) {
	sub := AppendPacket(nil, Req, SubmitJobBg, []byte("fn"), []byte(""), []byte("da\x00ta"))
	long := AppendPacket(nil, Req, SubmitJob, []byte("fn"), []byte(strings.Repeat("u", 80)), []byte("x"))
	bad := []byte("\x00REQ\x00\x00\x00\x07\x00\x00\x00\x00") // SUBMIT_JOB without its arguments
	var in []byte
	in = append(in, sub...)
	in = append(in, "status\n"...)
	in = append(in, long...)
	in = append(in, bad...)
	r := NewReader(bytes.NewReader(in), Limits{MaxUniqueSize: 64})

	f, err := r.ReadFrame()
	if err != nil || !bytes.Equal(r.LastPacket(), sub) {
		t.Fatalf("packet: %v, last %q, want %q", err, r.LastPacket(), sub)
	}
	if again := f.Packet.AppendTo(nil); !bytes.Equal(again, r.LastPacket()) {
		t.Fatalf("encoded again: %q, read %q", again, r.LastPacket())
	}
	if _, err := r.ReadFrame(); err != nil || r.LastPacket() != nil {
		t.Fatalf("text line: %v, last %q, want nil", err, r.LastPacket())
	}
	if _, err := r.ReadFrame(); !errors.Is(err, ErrUniqueTooLong) || !bytes.Equal(r.LastPacket(), long) {
		t.Fatalf("packet with an error: %v, last %q, want %q", err, r.LastPacket(), long)
	}
	if _, err := r.ReadFrame(); !errors.Is(err, ErrTooFewArgs) || r.LastPacket() != nil {
		t.Fatalf("malformed packet: %v, last %q, want nil", err, r.LastPacket())
	}
}
