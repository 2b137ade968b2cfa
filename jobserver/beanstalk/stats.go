package beanstalk

import (
	wire "github.com/jobgate/jobgate/codec/beanstalk"
	"strconv"
	"time"
)

// The YAML bodies of stats, stats-tube, stats-job, list-tubes and
// list-tubes-watched, key for key and in the order beanstalkd 1.12 prints
// them. Bodies exclude the final "\r\n", which the codec adds.

func appendKV(b []byte, key string, v uint64) []byte {
	b = append(b, key...)
	b = append(b, ": "...)
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}

func appendKVInt(b []byte, key string, v int64) []byte {
	b = append(b, key...)
	b = append(b, ": "...)
	b = strconv.AppendInt(b, v, 10)
	return append(b, '\n')
}

// appendKVStr writes a string value, quoted when asked to (1.13 quotes
// strings, 1.12 does not).
func appendKVStr(b []byte, key, v string, quote bool) []byte {
	b = append(b, key...)
	b = append(b, ": "...)
	if quote {
		b = append(b, '"')
		b = append(b, v...)
		b = append(b, '"')
	} else {
		b = append(b, v...)
	}
	return append(b, '\n')
}

// appendSeconds writes a CPU time as beanstalkd does: seconds.microseconds.
func appendSeconds(b []byte, key string, d time.Duration) []byte {
	b = append(b, key...)
	b = append(b, ": "...)
	b = strconv.AppendInt(b, int64(d/time.Second), 10)
	b = append(b, '.')
	us := int64(d%time.Second) / int64(time.Microsecond)
	n := len(b)
	b = strconv.AppendInt(b, 1000000+us, 10) // seven digits: "1" + six zero-padded
	b = append(b[:n], b[n+1:]...)
	return append(b, '\n')
}

// cmdStatKeys pairs the cmd-* keys of stats with the counters, in
// beanstalkd's order (which is not the verb order).
var cmdStatKeys = []struct {
	key  string
	verb int
}{
	{"cmd-put", int(wire.Put)},
	{"cmd-peek", int(wire.Peek)},
	{"cmd-peek-ready", int(wire.PeekReady)},
	{"cmd-peek-delayed", int(wire.PeekDelayed)},
	{"cmd-peek-buried", int(wire.PeekBuried)},
	{"cmd-reserve", int(wire.Reserve)},
	{"cmd-reserve-with-timeout", int(wire.ReserveWithTimeout)},
	{"cmd-delete", int(wire.Delete)},
	{"cmd-release", int(wire.Release)},
	{"cmd-use", int(wire.Use)},
	{"cmd-watch", int(wire.Watch)},
	{"cmd-ignore", int(wire.Ignore)},
	{"cmd-bury", int(wire.Bury)},
	{"cmd-kick", int(wire.Kick)},
	{"cmd-touch", int(wire.Touch)},
	{"cmd-stats", int(wire.Stats)},
	{"cmd-stats-job", int(wire.StatsJob)},
	{"cmd-stats-tube", int(wire.StatsTube)},
	{"cmd-list-tubes", int(wire.ListTubes)},
	{"cmd-list-tube-used", int(wire.ListTubeUsed)},
	{"cmd-list-tubes-watched", int(wire.ListTubesWatched)},
	{"cmd-pause-tube", int(wire.PauseTube)},
}

func (e *Engine) appendStats(b []byte, now int64) []byte {
	st := &e.st
	b = append(b, "---\n"...)
	b = appendKV(b, "current-jobs-urgent", st.urgent)
	b = appendKV(b, "current-jobs-ready", st.ready)
	b = appendKV(b, "current-jobs-reserved", st.reserved)
	b = appendKV(b, "current-jobs-delayed", st.delayed)
	b = appendKV(b, "current-jobs-buried", st.buried)
	for _, k := range cmdStatKeys {
		b = appendKV(b, k.key, st.cmd[k.verb])
	}
	b = appendKV(b, "job-timeouts", st.timeouts)
	b = appendKV(b, "total-jobs", st.totalJobs)
	b = appendKV(b, "max-job-size", uint64(e.maxJobSize))
	b = appendKV(b, "current-tubes", uint64(len(e.tubeList)))
	b = appendKV(b, "current-connections", uint64(st.conns))
	b = appendKV(b, "current-producers", uint64(st.producers))
	b = appendKV(b, "current-workers", uint64(st.workers))
	b = appendKV(b, "current-waiting", uint64(st.waiting))
	b = appendKV(b, "total-connections", uint64(st.totalConns))
	b = appendKVInt(b, "pid", int64(e.sys.PID))
	b = appendKVStr(b, "version", e.version, true) // quoted in 1.12 too
	var user, sys time.Duration
	if e.sys.Rusage != nil {
		user, sys = e.sys.Rusage()
	}
	b = appendSeconds(b, "rusage-utime", user)
	b = appendSeconds(b, "rusage-stime", sys)
	b = appendKVInt(b, "uptime", now/int64(time.Second))
	// No binlog yet: beanstalkd without -b prints these values.
	b = appendKV(b, "binlog-oldest-index", 0)
	b = appendKV(b, "binlog-current-index", 0)
	b = appendKV(b, "binlog-records-migrated", 0)
	b = appendKV(b, "binlog-records-written", 0)
	b = appendKV(b, "binlog-max-size", binlogMaxSize)
	b = appendKVStr(b, "draining", strconv.FormatBool(e.draining), false)
	b = appendKVStr(b, "id", e.sys.InstanceID, false)
	b = appendKVStr(b, "hostname", e.sys.Hostname, e.quote)
	b = appendKVStr(b, "os", e.sys.OS, e.quote)
	b = appendKVStr(b, "platform", e.sys.Platform, e.quote)
	return b
}

func (e *Engine) appendTubeStats(b []byte, t *tube, now int64) []byte {
	e.pausedLocked(t, now) // a pause that has run out shows as none
	var left int64
	if t.paused {
		left = (t.unpauseAt - now) / int64(time.Second)
	}
	b = append(b, "---\n"...)
	b = appendKVStr(b, "name", t.name, e.quote)
	b = appendKV(b, "current-jobs-urgent", t.urgent)
	b = appendKV(b, "current-jobs-ready", uint64(t.ready.len()))
	b = appendKV(b, "current-jobs-reserved", t.reserved)
	b = appendKV(b, "current-jobs-delayed", uint64(t.delay.len()))
	b = appendKV(b, "current-jobs-buried", uint64(t.buried.len()))
	b = appendKV(b, "total-jobs", t.totalJobs)
	b = appendKV(b, "current-using", uint64(t.using))
	b = appendKV(b, "current-watching", uint64(t.watching))
	b = appendKV(b, "current-waiting", uint64(t.waiters.len()))
	b = appendKV(b, "cmd-delete", t.deletes)
	b = appendKV(b, "cmd-pause-tube", t.pauses)
	b = appendKVInt(b, "pause", t.pause/int64(time.Second))
	b = appendKVInt(b, "pause-time-left", left)
	return b
}

func (e *Engine) appendJobStats(b []byte, j *job, now int64) []byte {
	var left int64
	if j.state == stateReserved || j.state == stateDelayed {
		left = (j.deadline - now) / int64(time.Second)
	}
	b = append(b, "---\n"...)
	b = appendKV(b, "id", j.id)
	b = appendKVStr(b, "tube", j.tube.name, e.quote)
	b = appendKVStr(b, "state", stateNames[j.state], false)
	b = appendKV(b, "pri", uint64(j.pri))
	b = appendKVInt(b, "age", (now-j.created)/int64(time.Second))
	b = appendKV(b, "delay", uint64(j.delay))
	b = appendKV(b, "ttr", uint64(j.ttr))
	b = appendKVInt(b, "time-left", left)
	b = appendKV(b, "file", 0)
	b = appendKV(b, "reserves", uint64(j.reserves))
	b = appendKV(b, "timeouts", uint64(j.timeouts))
	b = appendKV(b, "releases", uint64(j.releases))
	b = appendKV(b, "buries", uint64(j.buries))
	b = appendKV(b, "kicks", uint64(j.kicks))
	return b
}

// appendTubeList writes a YAML list of tube names.
func appendTubeList(b []byte, tubes []*tube) []byte {
	b = append(b, "---\n"...)
	for _, t := range tubes {
		b = append(b, "- "...)
		b = append(b, t.name...)
		b = append(b, '\n')
	}
	return b
}
