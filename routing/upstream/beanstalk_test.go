package upstream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/routing"
)

// direct is a plain connection to a server, to look at it from outside
// the session under test.
type direct struct {
	t  *testing.T
	nc net.Conn
	w  *beanstalk.Writer
	r  *beanstalk.ReplyReader
}

func dialDirect(t *testing.T, addr string) *direct {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(wait))
	return &direct{t: t, nc: nc, w: beanstalk.NewWriter(nc), r: beanstalk.NewReplyReader(nc, beanstalk.Limits{})}
}

// do sends cmd and returns a copy of the reply.
func (d *direct) do(cmd beanstalk.Command) beanstalk.Reply {
	d.t.Helper()
	if err := d.w.WriteCommand(&cmd); err != nil {
		d.t.Fatal(err)
	}
	if err := d.w.Flush(); err != nil {
		d.t.Fatal(err)
	}
	r, err := d.r.ReadReply()
	if err != nil {
		d.t.Fatal(err)
	}
	return copyReply(r)
}

func (d *direct) jobStats(id uint64) (beanstalk.JobStats, bool) {
	d.t.Helper()
	r := d.do(beanstalk.Command{Verb: beanstalk.StatsJob, ID: id})
	var st beanstalk.JobStats
	if r.Kind != beanstalk.OK {
		return st, false
	}
	if err := st.ParseYAML(r.Body); err != nil {
		d.t.Fatal(err)
	}
	return st, true
}

func (d *direct) stat(key string) string {
	d.t.Helper()
	r := d.do(beanstalk.Command{Verb: beanstalk.Stats})
	val := ""
	_ = beanstalk.ParseDict(r.Body, func(k, v []byte) {
		if string(k) == key {
			val = string(v)
		}
	})
	return val
}

func (d *direct) statInt(key string) int {
	d.t.Helper()
	n, err := strconv.Atoi(d.stat(key))
	if err != nil {
		d.t.Fatalf("stat %s: %v", key, err)
	}
	return n
}

func copyReply(r *beanstalk.Reply) beanstalk.Reply {
	c := *r
	c.Tube = bytes.Clone(r.Tube)
	c.Body = bytes.Clone(r.Body)
	return c
}

// result is one done callback's arguments, copied.
type result struct {
	reply beanstalk.Reply
	err   error
}

// results collects done callbacks in the order they are called.
type results struct {
	mu  sync.Mutex
	got []result
	ch  chan struct{}
}

func newResults() *results { return &results{ch: make(chan struct{}, 1000)} }

// done returns a callback that appends to the results, failing the test if
// it is called twice. Callbacks record in the order they run, so indexes
// in the results check the Do order.
func (rs *results) done(t *testing.T) func(*beanstalk.Reply, error) {
	var once sync.Once
	return func(r *beanstalk.Reply, err error) {
		called := false
		once.Do(func() { called = true })
		if !called {
			t.Error("done called twice")
			return
		}
		res := result{err: err}
		if r != nil {
			res.reply = copyReply(r)
		}
		rs.mu.Lock()
		rs.got = append(rs.got, res)
		rs.mu.Unlock()
		rs.ch <- struct{}{}
	}
}

// wait blocks until n callbacks in all have run and returns them.
func (rs *results) wait(t *testing.T, n int) []result {
	t.Helper()
	deadline := time.After(wait)
	for {
		rs.mu.Lock()
		if len(rs.got) >= n {
			out := append([]result(nil), rs.got...)
			rs.mu.Unlock()
			return out
		}
		rs.mu.Unlock()
		select {
		case <-rs.ch:
		case <-deadline:
			t.Fatalf("only %d of %d replies", len(rs.got), n)
		}
	}
}

func newBeanstalk(t *testing.T, cfg BeanstalkConfig) *Beanstalk {
	t.Helper()
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = time.Second
	}
	b, err := NewBeanstalk(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openBeanstalk(t *testing.T, b *Beanstalk) (routing.BeanstalkConn, chan error) {
	t.Helper()
	lost := make(chan error, 1)
	if onLoop {
		return openBeanstalkLoop(t, b, lost), lost
	}
	c, err := b.Open(context.Background(), func(err error) { lost <- err })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, lost
}

func put(tube string, pri uint32, body string) []beanstalk.Command {
	return []beanstalk.Command{
		{Verb: beanstalk.Use, Tube: []byte(tube)},
		{Verb: beanstalk.Put, Pri: pri, TTR: 60, Body: []byte(body)},
	}
}

func TestBeanstalkPipelined(t *testing.T) {
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: testutil.StartBeanstalkd(t), IOTimeout: 5 * time.Second}})
	c, _ := openBeanstalk(t, b)
	rs := newResults()
	cmds := append(put("t1", 5, "a"),
		beanstalk.Command{Verb: beanstalk.Put, Pri: 5, TTR: 60, Body: []byte("b")},
		beanstalk.Command{Verb: beanstalk.Watch, Tube: []byte("t1")},
		beanstalk.Command{Verb: beanstalk.Ignore, Tube: []byte("default")},
		beanstalk.Command{Verb: beanstalk.Peek, ID: 999999},
	)
	for i := range cmds {
		c.Do(&cmds[i], rs.done(t))
	}
	flush(t, c)
	got := rs.wait(t, len(cmds))
	want := []beanstalk.ReplyKind{beanstalk.Using, beanstalk.Inserted, beanstalk.Inserted,
		beanstalk.Watching, beanstalk.Watching, beanstalk.NotFound}
	for i, w := range want {
		if got[i].err != nil || got[i].reply.Kind != w {
			t.Fatalf("reply %d = %+v, want %v", i, got[i], w)
		}
	}
	id1, id2 := got[1].reply.ID, got[2].reply.ID
	if got[3].reply.Count != 2 || got[4].reply.Count != 1 || id2 <= id1 {
		t.Fatalf("replies %+v", got)
	}

	// Reserve, delete, reserve, delete, then nothing left: each answered
	// in order (the reserve is sent as reserve-with-timeout rounds).
	rs2 := newResults()
	c.Do(&beanstalk.Command{Verb: beanstalk.Reserve}, rs2.done(t))
	flush(t, c)
	r := rs2.wait(t, 1)[0]
	if r.err != nil || r.reply.Kind != beanstalk.Reserved || r.reply.ID != id1 || string(r.reply.Body) != "a" {
		t.Fatalf("reserve: %+v", r)
	}
	more := []beanstalk.Command{
		{Verb: beanstalk.Delete, ID: id1},
		{Verb: beanstalk.ReserveWithTimeout, Timeout: 0},
	}
	for i := range more {
		c.Do(&more[i], rs2.done(t))
	}
	flush(t, c)
	got = rs2.wait(t, 3)
	if got[1].reply.Kind != beanstalk.Deleted || got[2].reply.Kind != beanstalk.Reserved || got[2].reply.ID != id2 {
		t.Fatalf("replies %+v", got[1:])
	}
	tail := []beanstalk.Command{
		{Verb: beanstalk.Delete, ID: id2},
		{Verb: beanstalk.StatsTube, Tube: []byte("t1")},
	}
	for i := range tail {
		c.Do(&tail[i], rs2.done(t))
	}
	flush(t, c)
	c.Do(&beanstalk.Command{Verb: beanstalk.ReserveWithTimeout, Timeout: 0}, rs2.done(t))
	flush(t, c)
	got = rs2.wait(t, 6)
	if got[3].reply.Kind != beanstalk.Deleted || got[4].reply.Kind != beanstalk.OK || got[5].reply.Kind != beanstalk.TimedOut {
		t.Fatalf("replies %+v", got[3:])
	}
	if err := b.Probe(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
}

// TestBeanstalkReserveCancel: a cancelled reserve answers TIMED_OUT at
// once; a job put while its round is still waiting on the server is
// reserved by that round and must go straight back to ready with its
// priority, as a second connection sees.
func TestBeanstalkReserveCancel(t *testing.T) {
	addr := testutil.StartBeanstalkd(t)
	// A long round, so that the put below certainly lands in it.
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: addr, IOTimeout: 5 * time.Second}, ReserveRound: 5 * time.Second})
	c, _ := openBeanstalk(t, b)
	rs := newResults()
	c.Do(&beanstalk.Command{Verb: beanstalk.Watch, Tube: []byte("c")}, rs.done(t))
	c.Do(&beanstalk.Command{Verb: beanstalk.Reserve}, rs.done(t))
	flush(t, c)
	rs.wait(t, 1)
	d := dialDirect(t, addr)
	// Wait until the round is waiting on the server.
	for deadline := time.Now().Add(wait); d.stat("current-waiting") != "1"; {
		if time.Now().After(deadline) {
			t.Fatal("reserve never waited on the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.Cancel()
	got := rs.wait(t, 2)
	if got[1].err != nil || got[1].reply.Kind != beanstalk.TimedOut {
		t.Fatalf("cancelled reserve: %+v", got[1])
	}
	c.Cancel() // nothing pending: no effect, no second callback

	d.do(beanstalk.Command{Verb: beanstalk.Use, Tube: []byte("c")})
	ins := d.do(beanstalk.Command{Verb: beanstalk.Put, Pri: 77, TTR: 60, Body: []byte("keep me")})
	if ins.Kind != beanstalk.Inserted {
		t.Fatalf("put: %v", ins.Kind)
	}
	var st beanstalk.JobStats
	for deadline := time.Now().Add(wait); ; {
		var ok bool
		st, ok = d.jobStats(ins.ID)
		if !ok {
			t.Fatal("job lost")
		}
		if st.State == "ready" && st.Reserves == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not given back: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st.Pri != 77 || st.Releases != 1 || st.Delay != 0 {
		t.Fatalf("job given back as %+v, want pri 77, one release, no delay", st)
	}
	// The session goes on: its next command is answered.
	c.Do(&beanstalk.Command{Verb: beanstalk.ListTubeUsed}, rs.done(t))
	flush(t, c)
	if r := rs.wait(t, 3)[2]; r.err != nil || r.reply.Kind != beanstalk.Using {
		t.Fatalf("after cancel: %+v", r)
	}
	// And the job is there for the next consumer, still in the tube.
	d.do(beanstalk.Command{Verb: beanstalk.Watch, Tube: []byte("c")})
	if r := d.do(beanstalk.Command{Verb: beanstalk.ReserveWithTimeout}); r.Kind != beanstalk.Reserved || r.ID != ins.ID {
		t.Fatalf("second consumer got %v %d", r.Kind, r.ID)
	}
}

// TestBeanstalkReserveRounds: a reserve outlasts its rounds (the job comes
// in the second), and a timed reserve ends when its time, measured on the
// injected clock, is used up.
func TestBeanstalkReserveRounds(t *testing.T) {
	addr := testutil.StartBeanstalkd(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: addr, IOTimeout: 5 * time.Second}, ReserveRound: time.Second, Clock: clk})
	c, _ := openBeanstalk(t, b)
	rs := newResults()
	c.Do(&beanstalk.Command{Verb: beanstalk.Reserve}, rs.done(t))
	flush(t, c)
	d := dialDirect(t, addr)
	for deadline := time.Now().Add(wait); d.statInt("cmd-reserve-with-timeout") < 2; {
		if time.Now().After(deadline) {
			t.Fatal("no second round")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ins := d.do(beanstalk.Command{Verb: beanstalk.Put, TTR: 60, Body: []byte("late")})
	if r := rs.wait(t, 1)[0]; r.err != nil || r.reply.Kind != beanstalk.Reserved || r.reply.ID != ins.ID {
		t.Fatalf("reserve: %+v", r)
	}

	c.Do(&beanstalk.Command{Verb: beanstalk.ReserveWithTimeout, Timeout: 3600}, rs.done(t))
	flush(t, c)
	clk.Advance(time.Hour) // the hour passes during the first round
	if r := rs.wait(t, 2)[1]; r.err != nil || r.reply.Kind != beanstalk.TimedOut {
		t.Fatalf("timed reserve: %+v", r)
	}
}

// TestBeanstalkReserveLastRound: a reserve-with-timeout of 2 s in rounds
// of 1 s has a hair under a second left when its first round ends; it
// must wait that second in a second round, not answer TIMED_OUT a second
// early.
func TestBeanstalkReserveLastRound(t *testing.T) {
	addr := testutil.StartBeanstalkd(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: addr, IOTimeout: 5 * time.Second}, ReserveRound: time.Second, Clock: clk})
	c, _ := openBeanstalk(t, b)
	rs := newResults()
	d := dialDirect(t, addr)
	c.Do(&beanstalk.Command{Verb: beanstalk.ReserveWithTimeout, Timeout: 2}, rs.done(t))
	flush(t, c)
	clk.Advance(time.Second + time.Millisecond) // the first round's second, and the round trip
	for deadline := time.Now().Add(wait); d.statInt("cmd-reserve-with-timeout") < 2; {
		if time.Now().After(deadline) {
			t.Fatal("no second round: the reserve ended after its first")
		}
		time.Sleep(20 * time.Millisecond)
	}
	clk.Advance(time.Second)
	if r := rs.wait(t, 1)[0]; r.err != nil || r.reply.Kind != beanstalk.TimedOut {
		t.Fatalf("timed reserve: %+v", r)
	}
}

// TestBeanstalkServerKilled: the server dies with a reserve pending on one
// session and commands in flight on another: every callback gets a
// transport error promptly, then the closed callback runs; later commands
// fail at once.
func TestBeanstalkServerKilled(t *testing.T) {
	srv := startProcess(t, "beanstalkd", testutil.FreePort(t), beanstalkdArgs)
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: srv.addr, IOTimeout: 5 * time.Second}, ReserveRound: 30 * time.Second})
	c, lost := openBeanstalk(t, b)
	rs := newResults()
	c.Do(&beanstalk.Command{Verb: beanstalk.Reserve}, rs.done(t))
	flush(t, c)
	d := dialDirect(t, srv.addr)
	for deadline := time.Now().Add(wait); d.stat("current-waiting") != "1"; {
		if time.Now().After(deadline) {
			t.Fatal("reserve never waited on the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	srv.kill()
	r := rs.wait(t, 1)[0]
	if !routing.IsTransport(r.err) {
		t.Fatalf("pending reserve got %+v, want a transport error", r)
	}
	select {
	case err := <-lost:
		if !routing.IsTransport(err) {
			t.Fatalf("closed with %v", err)
		}
	case <-time.After(wait):
		t.Fatal("closed callback not called")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to notice", d)
	}
	c.Do(&beanstalk.Command{Verb: beanstalk.Stats}, rs.done(t))
	if r := rs.wait(t, 2)[1]; !routing.IsTransport(r.err) {
		t.Fatalf("after loss: %+v", r)
	}
}

func TestBeanstalkCloseAnswersPending(t *testing.T) {
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: testutil.StartBeanstalkd(t)}, ReserveRound: 30 * time.Second})
	c, lost := openBeanstalk(t, b)
	rs := newResults()
	c.Do(&beanstalk.Command{Verb: beanstalk.Reserve}, rs.done(t))
	flush(t, c)
	c.Close()
	if r := rs.wait(t, 1)[0]; !errors.Is(r.err, routing.ErrClosed) {
		t.Fatalf("pending reserve after Close: %+v", r)
	}
	c.Do(&beanstalk.Command{Verb: beanstalk.Stats}, rs.done(t))
	if r := rs.wait(t, 2)[1]; !errors.Is(r.err, routing.ErrClosed) {
		t.Fatalf("Do after Close: %+v", r)
	}
	select {
	case err := <-lost:
		t.Fatalf("closed callback after Close: %v", err)
	default:
	}
}

func TestBeanstalkIOTimeout(t *testing.T) {
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: silentServer(t), IOTimeout: 100 * time.Millisecond}})
	c, lost := openBeanstalk(t, b)
	rs := newResults()
	c.Do(&beanstalk.Command{Verb: beanstalk.ListTubeUsed}, rs.done(t))
	flush(t, c)
	if r := rs.wait(t, 1)[0]; !errors.Is(r.err, routing.ErrTimeout) {
		t.Fatalf("got %+v, want ErrTimeout", r)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, routing.ErrTimeout) {
			t.Fatalf("closed with %v", err)
		}
	case <-time.After(wait):
		t.Fatal("closed callback not called")
	}
}

// TestBeanstalkReplyTooBig: a job over the session's limit is reported to
// its reserve as a *beanstalk.ReplyTooBigError naming the job, which stays
// reserved by the session; the session goes on.
func TestBeanstalkReplyTooBig(t *testing.T) {
	addr := testutil.StartBeanstalkd(t)
	d := dialDirect(t, addr)
	ins := d.do(beanstalk.Command{Verb: beanstalk.Put, TTR: 60, Body: []byte("twenty bytes of body")})
	b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: addr, IOTimeout: wait}, Limits: beanstalk.Limits{MaxJobSize: 10}})
	c, _ := openBeanstalk(t, b)
	rs := newResults()
	c.Do(&beanstalk.Command{Verb: beanstalk.ReserveWithTimeout}, rs.done(t))
	c.Do(&beanstalk.Command{Verb: beanstalk.Release, ID: ins.ID, Pri: 3}, rs.done(t))
	flush(t, c)
	got := rs.wait(t, 2)
	var big *beanstalk.ReplyTooBigError
	if !errors.As(got[0].err, &big) || big.ID != ins.ID {
		t.Fatalf("reserve: %+v", got[0])
	}
	if got[1].err != nil || got[1].reply.Kind != beanstalk.Released {
		t.Fatalf("release: %+v", got[1])
	}
	if st, _ := d.jobStats(ins.ID); st.State != "ready" || st.Pri != 3 {
		t.Fatalf("job %+v", st)
	}
}
