//go:build linux

package proxy

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// flatOut returns b's pending output as the bytes the client will get.
func flatOut(b *bloopConn) []byte {
	var out []byte
	prev := 0
	for _, r := range b.refs {
		out = append(append(out, b.out[prev:r.at]...), r.body...)
		prev = r.at
	}
	return append(out, b.out[prev:]...)
}

// TestBloopConsumeEveryCut: whatever a write takes, bodies queued by
// reference included, what is left is exactly the rest of the stream.
func TestBloopConsumeEveryCut(t *testing.T) {
	replies := []wire.Reply{
		{Kind: wire.Reserved, ID: 1, Body: []byte(strings.Repeat("a", bloopRefMin))},
		{Kind: wire.Found, ID: 2, Body: []byte(strings.Repeat("b", bloopRefMin+3))},
		{Kind: wire.Inserted, ID: 3},
		{Kind: wire.Found, ID: 4, Body: []byte(strings.Repeat("c", bloopRefMin-1))},
		{Kind: wire.Reserved, ID: 5, Body: []byte(strings.Repeat("d", bloopRefMin))},
		{Kind: wire.OK, Body: []byte(strings.Repeat("e", 3*bloopRefMin))}, // not a job's: copied
	}
	var b bloopConn
	var want []byte
	for i := range replies {
		b.appendReply(&replies[i], true)
		want = replies[i].AppendTo(want)
	}
	if len(b.refs) != 3 {
		t.Fatalf("%d bodies by reference, want 3", len(b.refs))
	}
	if got := flatOut(&b); !bytes.Equal(got, want) || b.pending() != len(want) {
		t.Fatalf("queued %d bytes (pending %d), want %d", len(got), b.pending(), len(want))
	}
	for n := 0; n <= len(want); n++ {
		c := bloopConn{out: slices.Clone(b.out), refs: slices.Clone(b.refs), refBytes: b.refBytes}
		c.consume(n)
		if got := flatOut(&c); !bytes.Equal(got, want[n:]) || c.pending() != len(want)-n {
			t.Fatalf("after %d bytes: %d left (pending %d), want %d", n, len(got), c.pending(), len(want)-n)
		}
		for _, r := range c.refs {
			if len(r.body) == 0 || r.at < 0 || r.at > len(c.out) {
				t.Fatalf("after %d bytes: reference at %d of %d with %d bytes", n, r.at, len(c.out), len(r.body))
			}
		}
	}
}
