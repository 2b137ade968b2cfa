package beanstalk

import (
	"errors"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
)

// asyncConn is a session driven the way an event loop drives it: ExecAsync,
// and a notify that only signals.
type asyncConn struct {
	t      *testing.T
	s      *Session
	notify chan struct{}
}

func newAsyncConn(t *testing.T, e *Engine) *asyncConn {
	c := &asyncConn{t: t, notify: make(chan struct{}, 1)}
	c.s = e.NewSession(func() {
		select {
		case c.notify <- struct{}{}:
		default:
		}
	})
	t.Cleanup(c.s.Close)
	return c
}

// exec runs cmd with ExecAsync; ok false: pending.
func (c *asyncConn) exec(cmd wire.Command) (wire.Reply, bool) {
	var r wire.Reply
	ok := c.s.ExecAsync(&cmd, &r)
	return r, ok
}

// await waits for notify and collects the reply.
func (c *asyncConn) await() wire.Reply {
	c.t.Helper()
	select {
	case <-c.notify:
	case <-time.After(5 * time.Second):
		c.t.Fatal("no notify after the record became durable")
	}
	var r wire.Reply
	if !c.s.Result(&r) {
		c.t.Fatal("notified, but Result has no reply")
	}
	return r
}

// holdRecords makes m's tickets wait from now on; closing the returned
// channel completes them.
func holdRecords(m *memJournal) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gate = make(chan struct{})
	return m.gate
}

// TestExecAsyncPut: a journaled put returns pending without blocking, its
// job invisible, and is answered through notify and Result once durable;
// a reserve waiting meanwhile then gets the job.
func TestExecAsyncPut(t *testing.T) {
	m := &memJournal{}
	e := newMemEngine(t, m)
	p, other := newAsyncConn(t, e), newConn(t, e)
	other.startReserve()
	gate := holdRecords(m)
	if r, ok := p.exec(wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("x")}); ok {
		t.Fatalf("put answered %s before its record was durable", show(r))
	}
	var r wire.Reply
	if p.s.Result(&r) {
		t.Fatalf("Result before durable: %s", show(r))
	}
	if !p.s.Busy() {
		t.Error("a session with a pending put is not busy")
	}
	other.pending()
	close(gate)
	if r := p.await(); r.Kind != wire.Inserted || r.ID != 1 {
		t.Fatalf("put: %s", show(r))
	}
	if r := other.mustResult(wire.Reserved); r.ID != 1 {
		t.Fatalf("reserved %d", r.ID)
	}
	// Durable at once (no gate): answered in the call.
	m.mu.Lock()
	m.gate = nil
	m.mu.Unlock()
	if r, ok := p.exec(wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("y")}); !ok || r.Kind != wire.Inserted || r.ID != 2 {
		t.Fatalf("put with a durable record: %s, %v", show(r), ok)
	}
}

// TestExecAsyncChange: a journaled delete takes effect at once and is
// acknowledged once durable; commands without a record answer at once.
func TestExecAsyncChange(t *testing.T) {
	m := &memJournal{}
	e := newMemEngine(t, m)
	c, other := newAsyncConn(t, e), newConn(t, e)
	id := other.put(1, 0, 10, "a")
	gate := holdRecords(m)
	if r, ok := c.exec(wire.Command{Verb: wire.Delete, ID: id}); ok {
		t.Fatalf("delete answered %s before durable", show(r))
	}
	if r := other.id(wire.Peek, id); r.Kind != wire.NotFound {
		t.Errorf("deleted job still visible: %s", show(r))
	}
	close(gate)
	if r := c.await(); r.Kind != wire.Deleted {
		t.Fatalf("delete: %s", show(r))
	}
	if r, ok := c.exec(wire.Command{Verb: wire.ListTubeUsed}); !ok || r.Kind != wire.Using {
		t.Fatalf("list-tube-used: %s, %v", show(r), ok)
	}
}

// TestExecAsyncFailure: a record that fails answers INTERNAL_ERROR and the
// put's job is not kept; an append that fails answers at once.
func TestExecAsyncFailure(t *testing.T) {
	m := &memJournal{}
	e := newMemEngine(t, m)
	c, other := newAsyncConn(t, e), newConn(t, e)
	gate := holdRecords(m)
	m.mu.Lock()
	m.werr = errors.New("EIO")
	m.mu.Unlock()
	if _, ok := c.exec(wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("lost")}); ok {
		t.Fatal("put answered before its record completed")
	}
	close(gate)
	if r := c.await(); r.Kind != wire.InternalError {
		t.Fatalf("put: %s, want INTERNAL_ERROR", show(r))
	}
	if r := other.id(wire.Peek, 1); r.Kind != wire.NotFound {
		t.Errorf("failed put's job kept: %s", show(r))
	}
	if got := other.stat("total-jobs"); got != "0" {
		t.Errorf("total-jobs %s, want 0", got)
	}
	m.mu.Lock()
	m.fail = errors.New("disk gone")
	m.mu.Unlock()
	if r, ok := c.exec(wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("x")}); !ok || r.Kind != wire.InternalError {
		t.Fatalf("put with a failed append: %s, %v", show(r), ok)
	}
}

// TestExecAsyncManySessions: puts of several sessions that share a group
// commit are each answered, with ids in put order, and a session closed
// while its put is pending still leaves the job queued (the change was
// made), without a notify.
func TestExecAsyncManySessions(t *testing.T) {
	m := &memJournal{}
	e := newMemEngine(t, m)
	gate := holdRecords(m)
	var cs []*asyncConn
	for range 5 {
		c := newAsyncConn(t, e)
		if _, ok := c.exec(wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("j")}); ok {
			t.Fatal("put answered before durable")
		}
		cs = append(cs, c)
	}
	gone := newAsyncConn(t, e)
	gone.exec(wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("k")})
	gone.s.Close()
	close(gate)
	for i, c := range cs {
		if r := c.await(); r.Kind != wire.Inserted || r.ID != uint64(i+1) {
			t.Fatalf("session %d: %s", i, show(r))
		}
	}
	other := newConn(t, e)
	deadline := time.Now().Add(5 * time.Second)
	for other.stat("current-jobs-ready") != "6" {
		if time.Now().After(deadline) {
			t.Fatalf("current-jobs-ready %s, want 6 (the closed session's put too)", other.stat("current-jobs-ready"))
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-gone.notify:
		t.Error("a closed session was notified")
	default:
	}
}

// TestExecAsyncNoJournal: without a journal ExecAsync is Exec.
func TestExecAsyncNoJournal(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newAsyncConn(t, e)
	if r, ok := c.exec(wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("x")}); !ok || r.Kind != wire.Inserted {
		t.Fatalf("put: %s, %v", show(r), ok)
	}
}

// TestExecAsyncCloseWhilePending: an engine closed with a command pending
// (a server shut down) finishes it once its record completes, and its
// completer goroutine then ends.
func TestExecAsyncCloseWhilePending(t *testing.T) {
	m := &memJournal{}
	e := newMemEngine(t, m)
	c := newAsyncConn(t, e)
	gate := holdRecords(m)
	if _, ok := c.exec(wire.Command{Verb: wire.Put, TTR: 5, Body: []byte("x")}); ok {
		t.Fatal("put answered before durable")
	}
	c.s.Close()
	e.Close()
	close(gate)
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		running, queued := e.async.running, len(e.async.queue)
		e.mu.Unlock()
		if !running && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("completer still running (%d queued) after Close and the record's completion", queued)
		}
		time.Sleep(time.Millisecond)
	}
	if j := e.jobs.get(1); j == nil || j.state == statePending {
		t.Errorf("the pending put was not finished: %+v", j)
	}
}
