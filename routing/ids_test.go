package routing

import (
	"errors"
	"math"
	"testing"
)

func allBackends() []*Backend { return backends(0, MaxBackendID+1) }

func TestIDRoundTrip(t *testing.T) {
	bs := allBackends()
	m, err := NewIDMap(bs)
	if err != nil {
		t.Fatal(err)
	}
	if m.Passthrough() {
		t.Fatal("passthrough with upstreams")
	}
	edges := []uint64{0, 1, 2, 1 << 31, 1<<32 - 1, 1 << 32, MaxUpstreamID - 1, MaxUpstreamID}
	for _, b := range bs {
		for _, id := range edges {
			cid, err := m.Encode(b, id)
			if err != nil {
				t.Fatalf("Encode(%d, %d): %v", b.ID, id, err)
			}
			if cid >= 1<<53 {
				t.Fatalf("Encode(%d, %d) = %d, not below 2^53", b.ID, id, cid)
			}
			if gb, gid := m.Decode(cid); gb != b || gid != id {
				t.Fatalf("Decode(Encode(%d, %d)) = %v, %d", b.ID, id, gb, gid)
			}
		}
		if _, err := m.Encode(b, MaxUpstreamID+1); !errors.Is(err, ErrIDOverflow) {
			t.Fatalf("Encode(%d, 2^43) = %v, want ErrIDOverflow", b.ID, err)
		}
	}
	// The local backend's small ids are unchanged even with upstreams.
	if cid, _ := m.Encode(bs[0], 12345); cid != 12345 {
		t.Errorf("local id rewritten to %d", cid)
	}
	if b, _ := m.Decode(1 << 53); b != nil {
		t.Error("an id over 2^53 decoded")
	}
	if _, err := m.Encode(&Backend{ID: 3}, 1); !errors.Is(err, ErrUnknownBackend) {
		t.Errorf("foreign backend: %v", err)
	}
}

func TestIDUnknownBackend(t *testing.T) {
	bs := backends(0, 3)
	m, _ := NewIDMap([]*Backend{bs[0], bs[2]})
	if b, _ := m.Decode(1<<UpstreamIDBits | 5); b != nil {
		t.Errorf("id of backend 1 decoded to %v", b)
	}
	if b, id := m.Decode(2<<UpstreamIDBits | 5); b != bs[2] || id != 5 {
		t.Errorf("decode = %v %d", b, id)
	}
	if _, err := m.Encode(bs[1], 1); !errors.Is(err, ErrUnknownBackend) {
		t.Errorf("encode for unknown backend: %v", err)
	}
}

func TestIDPassthrough(t *testing.T) {
	local := &Backend{ID: 0, Name: "local"}
	m, err := NewIDMap([]*Backend{local})
	if err != nil || !m.Passthrough() {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, MaxUpstreamID + 1, 1 << 53, math.MaxUint64} {
		if cid, err := m.Encode(local, id); err != nil || cid != id {
			t.Errorf("Encode(%d) = %d, %v", id, cid, err)
		}
		if b, got := m.Decode(id); b != local || got != id {
			t.Errorf("Decode(%d) = %v, %d", id, b, got)
		}
	}
}

func TestNewIDMapErrors(t *testing.T) {
	for _, bs := range [][]*Backend{
		{nil},
		{{ID: -1}},
		{{ID: MaxBackendID + 1}},
		{{ID: 2, Name: "a"}, {ID: 2, Name: "b"}},
	} {
		if _, err := NewIDMap(bs); err == nil {
			t.Errorf("NewIDMap(%v) succeeded", bs)
		}
		if _, err := NewHandleMap(bs); err == nil {
			t.Errorf("NewHandleMap(%v) succeeded", bs)
		}
	}
}

// FuzzIDDecode: Decode never panics, and whatever decodes re-encodes to the
// same id.
func FuzzIDDecode(f *testing.F) {
	bs := backends(0, 4)
	m, _ := NewIDMap([]*Backend{bs[0], bs[1], bs[3]})
	f.Add(uint64(0))
	f.Add(uint64(1<<UpstreamIDBits | 7))
	f.Add(uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, id uint64) {
		b, up := m.Decode(id)
		if b == nil {
			return
		}
		cid, err := m.Encode(b, up)
		if err != nil || cid != id {
			t.Fatalf("Decode(%d) = %d/%d, re-encodes to %d, %v", id, b.ID, up, cid, err)
		}
	})
}
