package routing

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestHandleRoundTrip(t *testing.T) {
	bs := allBackends()
	m, err := NewHandleMap(bs)
	if err != nil {
		t.Fatal(err)
	}
	handles := []string{"H:gear1:1", "H:x:18446744073709551615", "", "@", "@3:H:a:1", "x",
		strings.Repeat("h", 57)}
	buf := make([]byte, 0, 64)
	for _, b := range bs {
		for _, h := range handles {
			ch, err := m.Append(buf[:0], b, []byte(h))
			if errors.Is(err, ErrIDOverflow) {
				if len(h)+len(ch) <= MaxHandleLen {
					t.Fatalf("backend %d, %q: overflow though it fits", b.ID, h)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Append(%d, %q): %v", b.ID, h, err)
			}
			if len(ch) > MaxHandleLen || bytes.IndexByte(ch, 0) >= 0 {
				t.Fatalf("Append(%d, %q) = %q", b.ID, h, ch)
			}
			if b.ID == LocalID && !strings.HasPrefix(h, "@") && string(ch) != h {
				t.Fatalf("local handle %q rewritten to %q", h, ch)
			}
			gb, gh := m.Decode(ch)
			if gb != b || string(gh) != h {
				t.Fatalf("Decode(%q) = %v %q, want %d %q", ch, gb, gh, b.ID, h)
			}
		}
	}
	// The longest handles: 63 bytes fit, 64 do not.
	b1023 := bs[MaxBackendID]
	if _, err := m.Append(nil, b1023, []byte(strings.Repeat("h", 63-6))); err != nil {
		t.Errorf("63-byte handle: %v", err)
	}
	if _, err := m.Append(nil, b1023, []byte(strings.Repeat("h", 64-6))); !errors.Is(err, ErrIDOverflow) {
		t.Errorf("64-byte handle: %v", err)
	}
	if got, _ := m.Append(nil, bs[7], []byte("H:g:42")); string(got) != "@7:H:g:42" {
		t.Errorf("form = %q", got)
	}
}

func TestHandleDecodeGarbage(t *testing.T) {
	bs := backends(0, 3)
	m, _ := NewHandleMap([]*Backend{bs[0], bs[2]})
	for _, h := range []string{"@", "@:", "@1:x", "@02:x", "@2", "@2x", "@99999:x", "@1024:x",
		"@0:x", "@0:", "@-1:x", "@+2:x"} {
		if b, _ := m.Decode([]byte(h)); b != nil {
			t.Errorf("Decode(%q) = backend %d", h, b.ID)
		}
	}
	if b, h := m.Decode([]byte("@2:")); b != bs[2] || len(h) != 0 {
		t.Errorf("empty upstream handle: %v %q", b, h)
	}
	// Without a local backend, plain handles belong to nobody.
	up, _ := NewHandleMap(bs[1:])
	if b, _ := up.Decode([]byte("H:x:1")); b != nil {
		t.Errorf("plain handle decoded to %d with no local backend", b.ID)
	}
}

func TestHandlePassthrough(t *testing.T) {
	local := &Backend{ID: 0}
	m, _ := NewHandleMap([]*Backend{local})
	for _, h := range []string{"H:x:1", "@7:H:x:1", "@0:@", ""} {
		got, err := m.Append(nil, local, []byte(h))
		if err != nil || string(got) != h {
			t.Errorf("Append(%q) = %q, %v", h, got, err)
		}
		if b, d := m.Decode([]byte(h)); b != local || string(d) != h {
			t.Errorf("Decode(%q) = %v, %q", h, b, d)
		}
	}
}

func TestHandleAllocs(t *testing.T) {
	m, _ := NewHandleMap(allBackends())
	b, _ := m.Decode([]byte("@1:x"))
	buf := make([]byte, 0, 64)
	h := []byte("H:gearman-7:123456")
	enc, _ := m.Append(nil, b, h)
	if n := testing.AllocsPerRun(100, func() {
		buf, _ = m.Append(buf[:0], b, h)
		m.Decode(enc)
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// FuzzHandleDecode: Decode never panics, and whatever decodes re-encodes to
// the same handle (one client-visible handle per job).
func FuzzHandleDecode(f *testing.F) {
	bs := backends(0, 12)
	m, _ := NewHandleMap([]*Backend{bs[0], bs[1], bs[7], bs[11]})
	for _, s := range []string{"H:gear:1", "@7:H:g:1", "@0:@x", "@11:", "@", "@07:x", "@1024:x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, h []byte) {
		b, up := m.Decode(h)
		if b == nil {
			return
		}
		enc, err := m.Append(nil, b, up)
		if errors.Is(err, ErrIDOverflow) && len(h) > MaxHandleLen {
			return
		}
		if err != nil || !bytes.Equal(enc, h) {
			t.Fatalf("Decode(%q) = %d %q, re-encodes to %q, %v", h, b.ID, up, enc, err)
		}
	})
}
