package proxy

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
)

// scriptedListener answers Accept from a list of results.
type scriptedListener struct {
	net.Listener // nil: only Accept is called
	results      []acceptResult
}

type acceptResult struct {
	c   net.Conn
	err error
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	r := l.results[0]
	l.results = l.results[1:]
	return r.c, r.err
}

// TestAcceptLoopRetries checks that acceptLoop keeps its listener through
// errors such as EMFILE, serving the connections that come after them,
// and tells a listener closed on purpose (nil) from one closed by someone
// else (the error).
func TestAcceptLoopRetries(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pipe := func() net.Conn { a, b := net.Pipe(); b.Close(); return a }
	for _, onPurpose := range []bool{false, true} {
		l := &scriptedListener{results: []acceptResult{
			{err: syscall.EMFILE},
			{c: pipe()},
			{err: syscall.ENFILE},
			{err: syscall.ECONNABORTED},
			{c: pipe()},
			{err: net.ErrClosed},
		}}
		served := 0
		err := acceptLoop(l, "test", log, func() bool { return onPurpose && len(l.results) == 0 }, func(nc net.Conn) bool {
			served++
			nc.Close()
			return true
		})
		if served != 2 {
			t.Errorf("closed on purpose %v: served %d connections, want 2", onPurpose, served)
		}
		if onPurpose && err != nil {
			t.Errorf("closed on purpose: err %v, want nil", err)
		}
		if !onPurpose && !errors.Is(err, net.ErrClosed) {
			t.Errorf("closed by someone else: err %v, want net.ErrClosed", err)
		}
	}

	// serve refusing (shutdown began) closes the connection and ends the loop.
	a, b := net.Pipe()
	defer b.Close()
	l := &scriptedListener{results: []acceptResult{{c: a}}}
	if err := acceptLoop(l, "test", log, func() bool { return false }, func(net.Conn) bool { return false }); err != nil {
		t.Fatalf("refused connection: err %v", err)
	}
	if _, err := a.Write([]byte{1}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("the refused connection was not closed: write err %v", err)
	}
}
