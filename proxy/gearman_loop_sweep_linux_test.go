//go:build linux

package proxy

import (
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/epoll"
	"github.com/jobgate/jobgate/routing"
)

// fakeLoopConn is an upstream loop session that only says whether it has
// an I/O timeout, and ends when told.
type fakeLoopConn struct {
	timed bool
	over  bool
}

func (f *fakeLoopConn) Send(*codec.Packet) error           { return nil }
func (f *fakeLoopConn) Flush() error                       { return nil }
func (f *fakeLoopConn) Close()                             {}
func (f *fakeLoopConn) Attach(routing.Poller, int32) error { return nil }
func (f *fakeLoopConn) Ready(uint32) bool                  { return !f.over }
func (f *fakeLoopConn) Expire(time.Time)                   {}
func (f *fakeLoopConn) Timed() bool                        { return f.timed }
func (f *fakeLoopConn) Detach()                            {}
func (f *fakeLoopConn) Backlog() int                       { return 0 }
func (f *fakeLoopConn) ReadInto(routing.IOBatch) bool      { return false }
func (f *fakeLoopConn) WriteInto(routing.IOBatch) bool     { return false }
func (f *fakeLoopConn) Wrote()                             {}

var _ routing.GearmanLoopConn = (*fakeLoopConn)(nil)

// TestGearmanLoopSweepsOnlyTimedUpstreams: the loop wakes up for its
// upstream sweep only while a session with an I/O timeout is open; with
// sessions that have none, epoll_wait sleeps until something happens.
func TestGearmanLoopSweepsOnlyTimedUpstreams(t *testing.T) {
	p, err := epoll.New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := &gearmanLoop{poll: p}
	untimed, timed := &fakeLoopConn{}, &fakeLoopConn{timed: true}
	l.attaches = []routing.GearmanLoopConn{untimed}
	l.upstreamWork()
	if w := l.waitMsec(); w != -1 {
		t.Fatalf("wait %d ms with only an upstream without I/O timeout", w)
	}
	l.attaches = []routing.GearmanLoopConn{timed}
	l.upstreamWork()
	if w := l.waitMsec(); w != int(upSweep/time.Millisecond) {
		t.Fatalf("wait %d ms with an upstream with an I/O timeout", w)
	}
	timed.over = true
	l.upReady(upID(1), epoll.In)
	if w := l.waitMsec(); w != -1 {
		t.Fatalf("wait %d ms once the upstream with an I/O timeout ended", w)
	}
	untimed.over = true
	l.upReady(upID(0), epoll.In)
	if l.nups != 0 {
		t.Fatalf("%d upstreams left", l.nups)
	}
}
