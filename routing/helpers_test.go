package routing

import (
	"fmt"
	"testing"
)

// backends returns n upstream backends with ids first, first+1, ...
func backends(first, n int) []*Backend {
	bs := make([]*Backend, n)
	for i := range bs {
		bs[i] = &Backend{ID: first + i, Name: fmt.Sprintf("b%d", first+i)}
	}
	return bs
}

func mustPool(t testing.TB, kind PoolKind, bs ...*Backend) *Pool {
	t.Helper()
	p, err := NewPool("p", kind, bs...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// names returns n distinct realistic names.
func names(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "tube-%d.work", i)
	}
	return out
}
