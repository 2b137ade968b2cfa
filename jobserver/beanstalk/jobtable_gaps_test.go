package beanstalk

import (
	"testing"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/journal"
)

// pagesKept returns the number of pages e's job table holds.
func pagesKept(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.jobs.pages)
}

// TestRejectedPutsKeepNoPages checks that ids used up by refused puts
// (EXPECTED_CRLF), which skip whole pages, do not leave the emptied page
// that was being filled behind: a client repeating bad puts must not grow
// an idle engine's memory.
func TestRejectedPutsKeepNoPages(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	for range 20 {
		id := c.put(1, 0, 5, "x")
		c.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
		for range 2 * pageSize {
			c.s.RejectPut(wire.ExpectedCRLF)
		}
	}
	id := c.put(1, 0, 5, "x")
	c.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
	if n := pagesKept(e); n != 1 {
		t.Fatalf("an idle engine keeps %d pages, want only the one being filled", n)
	}
}

// TestRestartIDGapKeepsNoPages checks that a restart, which resumes ids at
// the journal's counter, pages past the last restored job, does not leave
// that job's page behind once it is deleted.
func TestRestartIDGapKeepsNoPages(t *testing.T) {
	dir := t.TempDir()
	opts := journal.Options{Sync: journal.Never}
	in := openDurable(t, dir, testStart, opts)
	c := newConn(t, in.e)
	kept := c.put(1, 0, 5, "kept")
	for range 2 * pageSize {
		id := c.put(1, 0, 5, "gone")
		c.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
	}
	in.stop()
	in = openDurable(t, dir, testStart, opts)
	c = newConn(t, in.e)
	c.want(wire.Command{Verb: wire.Delete, ID: kept}, wire.Deleted)
	id := c.put(1, 0, 5, "next")
	if id>>pageBits == kept>>pageBits {
		t.Fatalf("id %d after restart is on the restored job's page", id)
	}
	c.want(wire.Command{Verb: wire.Delete, ID: id}, wire.Deleted)
	if n := pagesKept(in.e); n != 1 {
		t.Fatalf("after a restart the engine keeps %d pages, want only the one being filled", n)
	}
}
