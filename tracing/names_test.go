package tracing

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// TestNames: a name comes back equal to its bytes, the same string for the
// same bytes while it stays in its slot, and the bytes are copied (changing
// them later changes nothing); concurrent use is safe.
func TestNames(t *testing.T) {
	var n Names
	b := []byte("resize")
	s1 := n.String(b)
	s2 := n.String([]byte("resize"))
	if s1 != "resize" || s2 != "resize" {
		t.Fatalf("got %q, %q", s1, s2)
	}
	if unsafe.StringData(s1) != unsafe.StringData(s2) {
		t.Error("the same name was copied twice")
	}
	b[0] = 'X'
	if s1 != "resize" || n.String([]byte("resize")) != "resize" {
		t.Error("a kept name changed with the packet's bytes")
	}
	if n.String(nil) != "" {
		t.Error("empty name")
	}
	long := make([]byte, namesMaxLen+1)
	if n.String(long) != string(long) {
		t.Error("long name")
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				want := fmt.Sprintf("fn%d", i%300) // more names than slots
				if got := n.String([]byte(want)); got != want {
					t.Errorf("got %q, want %q", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestNamesAllocs: a name already kept costs no allocation.
func TestNamesAllocs(t *testing.T) {
	var n Names
	b := []byte("resize")
	n.String(b)
	if a := testing.AllocsPerRun(100, func() { n.String(b) }); a != 0 {
		t.Errorf("%v allocations per kept name", a)
	}
}
