package beanstalk

import (
	"fmt"
	"strings"
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
)

var testStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var testSystem = System{
	PID:        4242,
	Hostname:   "testhost",
	OS:         "#1 SMP",
	Platform:   "x86_64",
	InstanceID: "0123456789abcdef",
	Rusage:     func() (time.Duration, time.Duration) { return 1500 * time.Millisecond, 2 * time.Microsecond },
}

// newTestEngine returns an engine on a fake clock with fixed system facts.
func newTestEngine(t *testing.T) (*Engine, *clock.Fake) {
	t.Helper()
	fc := clock.NewFake(testStart)
	sys := testSystem
	e := mustNew(Config{Clock: fc, System: &sys})
	t.Cleanup(e.Close)
	return e, fc
}

// mustNew is New for configurations that cannot fail.
func mustNew(cfg Config) *Engine {
	e, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return e
}

// conn is a test client: a session plus a count of notify calls.
type conn struct {
	t        *testing.T
	s        *Session
	notified int
}

func newConn(t *testing.T, e *Engine) *conn {
	c := &conn{t: t}
	c.s = e.NewSession(func() { c.notified++ })
	t.Cleanup(c.s.Close)
	return c
}

// do runs a command that must answer at once.
func (c *conn) do(cmd wire.Command) wire.Reply {
	c.t.Helper()
	var r wire.Reply
	if !c.s.Exec(&cmd, &r) {
		c.t.Fatalf("%v: pending, want an immediate reply", verbName(cmd.Verb))
	}
	return r
}

// want runs a command and checks the reply's kind (and ID when non-zero).
func (c *conn) want(cmd wire.Command, kind wire.ReplyKind) wire.Reply {
	c.t.Helper()
	r := c.do(cmd)
	if r.Kind != kind {
		c.t.Fatalf("%v: got %s, want %s", verbName(cmd.Verb), show(r), kindName(kind))
	}
	return r
}

func (c *conn) put(pri, delay, ttr uint32, body string) uint64 {
	c.t.Helper()
	r := c.want(wire.Command{Verb: wire.Put, Pri: pri, Delay: delay, TTR: ttr, Body: []byte(body)}, wire.Inserted)
	return r.ID
}

func (c *conn) use(name string) {
	c.t.Helper()
	c.want(wire.Command{Verb: wire.Use, Tube: []byte(name)}, wire.Using)
}

func (c *conn) watch(name string) uint64 {
	c.t.Helper()
	return c.want(wire.Command{Verb: wire.Watch, Tube: []byte(name)}, wire.Watching).Count
}

func (c *conn) ignore(name string) wire.Reply {
	c.t.Helper()
	return c.do(wire.Command{Verb: wire.Ignore, Tube: []byte(name)})
}

// reserveNow reserves and expects a job at once; it returns its id and body.
func (c *conn) reserveNow() (uint64, string) {
	c.t.Helper()
	r := c.want(wire.Command{Verb: wire.Reserve}, wire.Reserved)
	return r.ID, string(r.Body)
}

// reserveTimeout runs reserve-with-timeout and returns the reply and
// whether it answered at once.
func (c *conn) reserveTimeout(sec uint32) (wire.Reply, bool) {
	var r wire.Reply
	cmd := wire.Command{Verb: wire.ReserveWithTimeout, Timeout: sec}
	done := c.s.Exec(&cmd, &r)
	return r, done
}

// startReserve issues a blocking reserve that must wait.
func (c *conn) startReserve() {
	c.t.Helper()
	var r wire.Reply
	cmd := wire.Command{Verb: wire.Reserve}
	if c.s.Exec(&cmd, &r) {
		c.t.Fatalf("reserve answered %s at once, want it to wait", show(r))
	}
}

// result collects a pending reserve's reply; ok is false while it waits.
func (c *conn) result() (wire.Reply, bool) {
	var r wire.Reply
	ok := c.s.Result(&r)
	return r, ok
}

func (c *conn) mustResult(kind wire.ReplyKind) wire.Reply {
	c.t.Helper()
	r, ok := c.result()
	if !ok {
		c.t.Fatalf("reserve still pending, want %s", kindName(kind))
	}
	if r.Kind != kind {
		c.t.Fatalf("reserve answered %s, want %s", show(r), kindName(kind))
	}
	return r
}

func (c *conn) pending() {
	c.t.Helper()
	if r, ok := c.result(); ok {
		c.t.Fatalf("reserve answered %s, want it still pending", show(r))
	}
}

func (c *conn) id(verb wire.Verb, id uint64) wire.Reply {
	return c.do(wire.Command{Verb: verb, ID: id})
}

// stats returns a stats YAML as a map, failing on duplicate keys.
func (c *conn) statsMap(cmd wire.Command) map[string]string {
	c.t.Helper()
	r := c.want(cmd, wire.OK)
	return parseYAMLMap(c.t, string(r.Body))
}

func (c *conn) jobStat(id uint64, key string) string {
	c.t.Helper()
	return c.statsMap(wire.Command{Verb: wire.StatsJob, ID: id})[key]
}

func (c *conn) tubeStat(name, key string) string {
	c.t.Helper()
	return c.statsMap(wire.Command{Verb: wire.StatsTube, Tube: []byte(name)})[key]
}

func (c *conn) stat(key string) string {
	c.t.Helper()
	return c.statsMap(wire.Command{Verb: wire.Stats})[key]
}

func parseYAMLMap(t *testing.T, body string) map[string]string {
	t.Helper()
	if !strings.HasPrefix(body, "---\n") {
		t.Fatalf("YAML does not start with ---: %q", body)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(body[4:], "\n"), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("bad YAML line %q", line)
		}
		if _, dup := m[k]; dup {
			t.Fatalf("duplicate key %q", k)
		}
		m[k] = v
	}
	return m
}

var kindNames = map[wire.ReplyKind]string{
	wire.Inserted: "INSERTED", wire.BuriedID: "BURIED <id>", wire.Buried: "BURIED",
	wire.Reserved: "RESERVED", wire.DeadlineSoon: "DEADLINE_SOON", wire.TimedOut: "TIMED_OUT",
	wire.Deleted: "DELETED", wire.NotFound: "NOT_FOUND", wire.Released: "RELEASED",
	wire.Touched: "TOUCHED", wire.Using: "USING", wire.Watching: "WATCHING",
	wire.NotIgnored: "NOT_IGNORED", wire.Found: "FOUND", wire.KickedCount: "KICKED <n>",
	wire.Kicked: "KICKED", wire.OK: "OK", wire.Paused: "PAUSED",
	wire.ExpectedCRLF: "EXPECTED_CRLF", wire.JobTooBig: "JOB_TOO_BIG", wire.Draining: "DRAINING",
	wire.OutOfMemory: "OUT_OF_MEMORY", wire.InternalError: "INTERNAL_ERROR",
	wire.BadFormat: "BAD_FORMAT", wire.UnknownCommand: "UNKNOWN_COMMAND",
}

func kindName(k wire.ReplyKind) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", k)
}

func verbName(v wire.Verb) string { return fmt.Sprintf("verb(%d)", v) }

func show(r wire.Reply) string {
	return fmt.Sprintf("%s id=%d count=%d tube=%q body=%q", kindName(r.Kind), r.ID, r.Count, r.Tube, r.Body)
}
