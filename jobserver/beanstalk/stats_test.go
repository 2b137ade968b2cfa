package beanstalk

import (
	"testing"
	"time"

	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
)

// The exact bodies, in beanstalkd 1.12's key order and format.

func TestStatsBody(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(1, 0, 10, "a")    // 1: urgent; reserved, then its TTR runs out
	c.put(2000, 0, 10, "b") // 2: ready, not urgent
	c.put(1, 30, 10, "c")   // 3: delayed, then ready and urgent
	c.reserveNow()
	w := newConn(t, e)
	w.watch("other")
	w.ignore("default")
	if _, done := w.reserveTimeout(200); done {
		t.Fatal("reserve on an empty tube answered at once")
	}
	fc.Advance(90 * time.Second)
	want := "---\n" +
		"current-jobs-urgent: 2\n" +
		"current-jobs-ready: 3\n" +
		"current-jobs-reserved: 0\n" +
		"current-jobs-delayed: 0\n" +
		"current-jobs-buried: 0\n" +
		"cmd-put: 3\n" +
		"cmd-peek: 0\n" +
		"cmd-peek-ready: 0\n" +
		"cmd-peek-delayed: 0\n" +
		"cmd-peek-buried: 0\n" +
		"cmd-reserve: 1\n" +
		"cmd-reserve-with-timeout: 1\n" +
		"cmd-delete: 0\n" +
		"cmd-release: 0\n" +
		"cmd-use: 0\n" +
		"cmd-watch: 1\n" +
		"cmd-ignore: 1\n" +
		"cmd-bury: 0\n" +
		"cmd-kick: 0\n" +
		"cmd-touch: 0\n" +
		"cmd-stats: 1\n" +
		"cmd-stats-job: 0\n" +
		"cmd-stats-tube: 0\n" +
		"cmd-list-tubes: 0\n" +
		"cmd-list-tube-used: 0\n" +
		"cmd-list-tubes-watched: 0\n" +
		"cmd-pause-tube: 0\n" +
		"job-timeouts: 1\n" +
		"total-jobs: 3\n" +
		"max-job-size: 65535\n" +
		"current-tubes: 2\n" +
		"current-connections: 2\n" +
		"current-producers: 1\n" +
		"current-workers: 2\n" +
		"current-waiting: 1\n" +
		"total-connections: 2\n" +
		"pid: 4242\n" +
		"version: \"1.12\"\n" +
		"rusage-utime: 1.500000\n" +
		"rusage-stime: 0.000002\n" +
		"uptime: 90\n" +
		"binlog-oldest-index: 0\n" +
		"binlog-current-index: 0\n" +
		"binlog-records-migrated: 0\n" +
		"binlog-records-written: 0\n" +
		"binlog-max-size: 10485760\n" +
		"draining: false\n" +
		"id: 0123456789abcdef\n" +
		"hostname: testhost\n" +
		"os: #1 SMP\n" +
		"platform: x86_64\n"
	got := string(c.want(wire.Command{Verb: wire.Stats}, wire.OK).Body)
	if got != want {
		t.Fatalf("stats body:\n%s\nwant:\n%s", got, want)
	}
}

func TestStatsTubeBody(t *testing.T) {
	e, _ := newTestEngine(t)
	c := newConn(t, e)
	c.use("jobs")
	c.put(5, 0, 10, "a")
	c.put(5, 10, 10, "b")
	want := "---\n" +
		"name: jobs\n" +
		"current-jobs-urgent: 1\n" +
		"current-jobs-ready: 1\n" +
		"current-jobs-reserved: 0\n" +
		"current-jobs-delayed: 1\n" +
		"current-jobs-buried: 0\n" +
		"total-jobs: 2\n" +
		"current-using: 1\n" +
		"current-watching: 0\n" +
		"current-waiting: 0\n" +
		"cmd-delete: 0\n" +
		"cmd-pause-tube: 0\n" +
		"pause: 0\n" +
		"pause-time-left: 0\n"
	got := string(c.want(wire.Command{Verb: wire.StatsTube, Tube: []byte("jobs")}, wire.OK).Body)
	if got != want {
		t.Fatalf("stats-tube body:\n%s\nwant:\n%s", got, want)
	}
}

func TestStatsJobBody(t *testing.T) {
	e, fc := newTestEngine(t)
	c := newConn(t, e)
	c.put(7, 0, 60, "a")
	fc.Advance(5 * time.Second)
	c.reserveNow()
	fc.Advance(2500 * time.Millisecond)
	want := "---\n" +
		"id: 1\n" +
		"tube: default\n" +
		"state: reserved\n" +
		"pri: 7\n" +
		"age: 7\n" +
		"delay: 0\n" +
		"ttr: 60\n" +
		"time-left: 57\n" +
		"file: 0\n" +
		"reserves: 1\n" +
		"timeouts: 0\n" +
		"releases: 0\n" +
		"buries: 0\n" +
		"kicks: 0\n"
	got := string(c.want(wire.Command{Verb: wire.StatsJob, ID: 1}, wire.OK).Body)
	if got != want {
		t.Fatalf("stats-job body:\n%s\nwant:\n%s", got, want)
	}
}

func TestStatsQuoted113(t *testing.T) {
	sys := testSystem
	e := mustNew(Config{Clock: clock.NewFake(testStart), System: &sys, QuoteStrings: true})
	defer e.Close()
	c := newConn(t, e)
	c.put(1, 0, 1, "x")
	m := c.statsMap(wire.Command{Verb: wire.Stats})
	if m["hostname"] != `"testhost"` || m["os"] != `"#1 SMP"` || m["platform"] != `"x86_64"` {
		t.Fatalf("1.13 quoting: %v", m)
	}
	if got := c.tubeStat("default", "name"); got != `"default"` {
		t.Fatalf("name %s", got)
	}
	if got := c.jobStat(1, "tube"); got != `"default"` {
		t.Fatalf("tube %s", got)
	}
}

func TestHostSystem(t *testing.T) {
	s := HostSystem()
	if s.PID <= 0 || s.Hostname == "" || len(s.InstanceID) != 16 || s.Rusage == nil {
		t.Fatalf("HostSystem() = %+v", s)
	}
}
