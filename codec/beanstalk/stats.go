package beanstalk

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// ServerStats is the body of the reply to stats, field for field; each
// field's comment names its key. The protocol document says what each
// counts; AppendYAML gives the exact form.
type ServerStats struct {
	CurrentJobsUrgent     uint64        // current-jobs-urgent
	CurrentJobsReady      uint64        // current-jobs-ready
	CurrentJobsReserved   uint64        // current-jobs-reserved
	CurrentJobsDelayed    uint64        // current-jobs-delayed
	CurrentJobsBuried     uint64        // current-jobs-buried
	CmdPut                uint64        // cmd-put
	CmdPeek               uint64        // cmd-peek
	CmdPeekReady          uint64        // cmd-peek-ready
	CmdPeekDelayed        uint64        // cmd-peek-delayed
	CmdPeekBuried         uint64        // cmd-peek-buried
	CmdReserve            uint64        // cmd-reserve
	CmdReserveWithTimeout uint64        // cmd-reserve-with-timeout
	CmdDelete             uint64        // cmd-delete
	CmdRelease            uint64        // cmd-release
	CmdUse                uint64        // cmd-use
	CmdWatch              uint64        // cmd-watch
	CmdIgnore             uint64        // cmd-ignore
	CmdBury               uint64        // cmd-bury
	CmdKick               uint64        // cmd-kick
	CmdTouch              uint64        // cmd-touch
	CmdStats              uint64        // cmd-stats
	CmdStatsJob           uint64        // cmd-stats-job
	CmdStatsTube          uint64        // cmd-stats-tube
	CmdListTubes          uint64        // cmd-list-tubes
	CmdListTubeUsed       uint64        // cmd-list-tube-used
	CmdListTubesWatched   uint64        // cmd-list-tubes-watched
	CmdPauseTube          uint64        // cmd-pause-tube
	JobTimeouts           uint64        // job-timeouts
	TotalJobs             uint64        // total-jobs
	MaxJobSize            uint64        // max-job-size
	CurrentTubes          uint64        // current-tubes
	CurrentConnections    uint64        // current-connections
	CurrentProducers      uint64        // current-producers
	CurrentWorkers        uint64        // current-workers
	CurrentWaiting        uint64        // current-waiting
	TotalConnections      uint64        // total-connections
	PID                   int64         // pid
	Version               string        // version
	RusageUtime           time.Duration // rusage-utime: printed as seconds with 6 decimals
	RusageStime           time.Duration // rusage-stime
	Uptime                uint64        // uptime: seconds
	BinlogOldestIndex     int64         // binlog-oldest-index
	BinlogCurrentIndex    int64         // binlog-current-index
	BinlogRecordsMigrated int64         // binlog-records-migrated
	BinlogRecordsWritten  int64         // binlog-records-written
	BinlogMaxSize         int64         // binlog-max-size
	Draining              bool          // draining
	ID                    string        // id: random hex id of the server process
	Hostname              string        // hostname
	OS                    string        // os
	Platform              string        // platform
}

// TubeStats is the body of the reply to stats-tube, as ServerStats.
type TubeStats struct {
	Name                string // name
	CurrentJobsUrgent   uint64 // current-jobs-urgent
	CurrentJobsReady    uint64 // current-jobs-ready
	CurrentJobsReserved uint64 // current-jobs-reserved
	CurrentJobsDelayed  uint64 // current-jobs-delayed
	CurrentJobsBuried   uint64 // current-jobs-buried
	TotalJobs           uint64 // total-jobs
	CurrentUsing        uint64 // current-using
	CurrentWatching     uint64 // current-watching
	CurrentWaiting      uint64 // current-waiting
	CmdDelete           uint64 // cmd-delete
	CmdPauseTube        uint64 // cmd-pause-tube
	Pause               uint64 // pause: seconds
	PauseTimeLeft       int64  // pause-time-left: seconds
}

// JobStats is the body of the reply to stats-job, as ServerStats. Times are
// in seconds.
type JobStats struct {
	ID       uint64 // id
	Tube     string // tube
	State    string // state: "ready", "delayed", "reserved" or "buried"
	Pri      uint32 // pri
	Age      int64  // age
	Delay    int64  // delay
	TTR      int64  // ttr
	TimeLeft int64  // time-left
	File     int64  // file
	Reserves uint64 // reserves
	Timeouts uint64 // timeouts
	Releases uint64 // releases
	Buries   uint64 // buries
	Kicks    uint64 // kicks
}

// field is one line of a stats dictionary: its key, how its value is
// written, and where it lives in the struct. One table per struct gives the
// exact order of beanstalkd's STATS_FMT, STATS_TUBE_FMT and STATS_JOB_FMT
// to both AppendYAML and ParseYAML.
type field[T any] struct {
	key    string
	quoted bool // strings only: quoted (beanstalkd 1.13) or raw
	ptr    func(*T) any
}

var statsFields = []field[ServerStats]{
	{"current-jobs-urgent", false, func(s *ServerStats) any { return &s.CurrentJobsUrgent }},
	{"current-jobs-ready", false, func(s *ServerStats) any { return &s.CurrentJobsReady }},
	{"current-jobs-reserved", false, func(s *ServerStats) any { return &s.CurrentJobsReserved }},
	{"current-jobs-delayed", false, func(s *ServerStats) any { return &s.CurrentJobsDelayed }},
	{"current-jobs-buried", false, func(s *ServerStats) any { return &s.CurrentJobsBuried }},
	{"cmd-put", false, func(s *ServerStats) any { return &s.CmdPut }},
	{"cmd-peek", false, func(s *ServerStats) any { return &s.CmdPeek }},
	{"cmd-peek-ready", false, func(s *ServerStats) any { return &s.CmdPeekReady }},
	{"cmd-peek-delayed", false, func(s *ServerStats) any { return &s.CmdPeekDelayed }},
	{"cmd-peek-buried", false, func(s *ServerStats) any { return &s.CmdPeekBuried }},
	{"cmd-reserve", false, func(s *ServerStats) any { return &s.CmdReserve }},
	{"cmd-reserve-with-timeout", false, func(s *ServerStats) any { return &s.CmdReserveWithTimeout }},
	{"cmd-delete", false, func(s *ServerStats) any { return &s.CmdDelete }},
	{"cmd-release", false, func(s *ServerStats) any { return &s.CmdRelease }},
	{"cmd-use", false, func(s *ServerStats) any { return &s.CmdUse }},
	{"cmd-watch", false, func(s *ServerStats) any { return &s.CmdWatch }},
	{"cmd-ignore", false, func(s *ServerStats) any { return &s.CmdIgnore }},
	{"cmd-bury", false, func(s *ServerStats) any { return &s.CmdBury }},
	{"cmd-kick", false, func(s *ServerStats) any { return &s.CmdKick }},
	{"cmd-touch", false, func(s *ServerStats) any { return &s.CmdTouch }},
	{"cmd-stats", false, func(s *ServerStats) any { return &s.CmdStats }},
	{"cmd-stats-job", false, func(s *ServerStats) any { return &s.CmdStatsJob }},
	{"cmd-stats-tube", false, func(s *ServerStats) any { return &s.CmdStatsTube }},
	{"cmd-list-tubes", false, func(s *ServerStats) any { return &s.CmdListTubes }},
	{"cmd-list-tube-used", false, func(s *ServerStats) any { return &s.CmdListTubeUsed }},
	{"cmd-list-tubes-watched", false, func(s *ServerStats) any { return &s.CmdListTubesWatched }},
	{"cmd-pause-tube", false, func(s *ServerStats) any { return &s.CmdPauseTube }},
	{"job-timeouts", false, func(s *ServerStats) any { return &s.JobTimeouts }},
	{"total-jobs", false, func(s *ServerStats) any { return &s.TotalJobs }},
	{"max-job-size", false, func(s *ServerStats) any { return &s.MaxJobSize }},
	{"current-tubes", false, func(s *ServerStats) any { return &s.CurrentTubes }},
	{"current-connections", false, func(s *ServerStats) any { return &s.CurrentConnections }},
	{"current-producers", false, func(s *ServerStats) any { return &s.CurrentProducers }},
	{"current-workers", false, func(s *ServerStats) any { return &s.CurrentWorkers }},
	{"current-waiting", false, func(s *ServerStats) any { return &s.CurrentWaiting }},
	{"total-connections", false, func(s *ServerStats) any { return &s.TotalConnections }},
	{"pid", false, func(s *ServerStats) any { return &s.PID }},
	{"version", true, func(s *ServerStats) any { return &s.Version }},
	{"rusage-utime", false, func(s *ServerStats) any { return &s.RusageUtime }},
	{"rusage-stime", false, func(s *ServerStats) any { return &s.RusageStime }},
	{"uptime", false, func(s *ServerStats) any { return &s.Uptime }},
	{"binlog-oldest-index", false, func(s *ServerStats) any { return &s.BinlogOldestIndex }},
	{"binlog-current-index", false, func(s *ServerStats) any { return &s.BinlogCurrentIndex }},
	{"binlog-records-migrated", false, func(s *ServerStats) any { return &s.BinlogRecordsMigrated }},
	{"binlog-records-written", false, func(s *ServerStats) any { return &s.BinlogRecordsWritten }},
	{"binlog-max-size", false, func(s *ServerStats) any { return &s.BinlogMaxSize }},
	{"draining", false, func(s *ServerStats) any { return &s.Draining }},
	{"id", false, func(s *ServerStats) any { return &s.ID }},
	{"hostname", true, func(s *ServerStats) any { return &s.Hostname }},
	{"os", true, func(s *ServerStats) any { return &s.OS }},
	{"platform", true, func(s *ServerStats) any { return &s.Platform }},
}

var tubeStatsFields = []field[TubeStats]{
	{"name", true, func(s *TubeStats) any { return &s.Name }},
	{"current-jobs-urgent", false, func(s *TubeStats) any { return &s.CurrentJobsUrgent }},
	{"current-jobs-ready", false, func(s *TubeStats) any { return &s.CurrentJobsReady }},
	{"current-jobs-reserved", false, func(s *TubeStats) any { return &s.CurrentJobsReserved }},
	{"current-jobs-delayed", false, func(s *TubeStats) any { return &s.CurrentJobsDelayed }},
	{"current-jobs-buried", false, func(s *TubeStats) any { return &s.CurrentJobsBuried }},
	{"total-jobs", false, func(s *TubeStats) any { return &s.TotalJobs }},
	{"current-using", false, func(s *TubeStats) any { return &s.CurrentUsing }},
	{"current-watching", false, func(s *TubeStats) any { return &s.CurrentWatching }},
	{"current-waiting", false, func(s *TubeStats) any { return &s.CurrentWaiting }},
	{"cmd-delete", false, func(s *TubeStats) any { return &s.CmdDelete }},
	{"cmd-pause-tube", false, func(s *TubeStats) any { return &s.CmdPauseTube }},
	{"pause", false, func(s *TubeStats) any { return &s.Pause }},
	{"pause-time-left", false, func(s *TubeStats) any { return &s.PauseTimeLeft }},
}

var jobStatsFields = []field[JobStats]{
	{"id", false, func(s *JobStats) any { return &s.ID }},
	{"tube", true, func(s *JobStats) any { return &s.Tube }},
	{"state", false, func(s *JobStats) any { return &s.State }},
	{"pri", false, func(s *JobStats) any { return &s.Pri }},
	{"age", false, func(s *JobStats) any { return &s.Age }},
	{"delay", false, func(s *JobStats) any { return &s.Delay }},
	{"ttr", false, func(s *JobStats) any { return &s.TTR }},
	{"time-left", false, func(s *JobStats) any { return &s.TimeLeft }},
	{"file", false, func(s *JobStats) any { return &s.File }},
	{"reserves", false, func(s *JobStats) any { return &s.Reserves }},
	{"timeouts", false, func(s *JobStats) any { return &s.Timeouts }},
	{"releases", false, func(s *JobStats) any { return &s.Releases }},
	{"buries", false, func(s *JobStats) any { return &s.Buries }},
	{"kicks", false, func(s *JobStats) any { return &s.Kicks }},
}

// AppendYAML adds s to b in the exact form of beanstalkd 1.13's stats
// reply: every key in its order, the version, hostname, os and platform
// quoted. Call b.Reset first for a fresh body.
func (s *ServerStats) AppendYAML(b *YAMLBuilder) { appendFields(b, s, statsFields) }

// cmdFieldIndex is, for each verb, the index in statsFields of its cmd-*
// counter (the key is "cmd-" and the command word), or -1.
var cmdFieldIndex = func() (idx [len(verbNames)]int) {
	for v := range idx {
		idx[v] = -1
		for i, f := range statsFields {
			if verbNames[v] != "" && f.key == "cmd-"+verbNames[v] {
				idx[v] = i
			}
		}
	}
	return idx
}()

// CmdCounter returns the cmd-* counter of s that counts v (CmdPut for
// Put...), or nil for a command stats does not count (reserve-job,
// kick-job, quit) or a value that is not a Verb.
func (s *ServerStats) CmdCounter(v Verb) *uint64 {
	if !v.valid() || cmdFieldIndex[v] < 0 {
		return nil
	}
	return statsFields[cmdFieldIndex[v]].ptr(s).(*uint64)
}

// ParseYAML sets the fields of s from a stats body, of beanstalkd 1.12
// (unquoted strings) or 1.13. Keys it does not know are ignored, and fields
// whose key is missing keep their value.
func (s *ServerStats) ParseYAML(body []byte) error { return parseFields(body, s, statsFields) }

// AppendYAML adds s to b in the exact form of beanstalkd 1.13's stats-tube
// reply, the name quoted.
func (s *TubeStats) AppendYAML(b *YAMLBuilder) { appendFields(b, s, tubeStatsFields) }

// ParseYAML sets the fields of s from a stats-tube body, as ServerStats.ParseYAML.
func (s *TubeStats) ParseYAML(body []byte) error { return parseFields(body, s, tubeStatsFields) }

// AppendYAML adds s to b in the exact form of beanstalkd 1.13's stats-job
// reply, the tube quoted.
func (s *JobStats) AppendYAML(b *YAMLBuilder) { appendFields(b, s, jobStatsFields) }

// ParseYAML sets the fields of s from a stats-job body, as ServerStats.ParseYAML.
func (s *JobStats) ParseYAML(body []byte) error { return parseFields(body, s, jobStatsFields) }

func appendFields[T any](b *YAMLBuilder, v *T, fields []field[T]) {
	for _, f := range fields {
		switch p := f.ptr(v).(type) {
		case *uint64:
			b.Uint(f.key, *p)
		case *uint32:
			b.Uint(f.key, uint64(*p))
		case *int64:
			b.Int(f.key, *p)
		case *bool:
			b.Bool(f.key, *p)
		case *time.Duration:
			b.Seconds(f.key, *p)
		case *string:
			if f.quoted {
				b.Quoted(f.key, *p)
			} else {
				b.Raw(f.key, *p)
			}
		}
	}
}

func parseFields[T any](body []byte, v *T, fields []field[T]) error {
	var bad error
	err := ParseDict(body, func(key, value []byte) {
		if bad != nil {
			return
		}
		for _, f := range fields {
			if f.key == string(key) {
				if !setField(f.ptr(v), value) {
					bad = yamlValueError(key, value)
				}
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return bad
}

// setField parses value into the field p points to.
func setField(p any, value []byte) bool {
	var err error
	switch p := p.(type) {
	case *uint64:
		*p, err = strconv.ParseUint(string(value), 10, 64)
	case *uint32:
		var u uint64
		u, err = strconv.ParseUint(string(value), 10, 32)
		*p = uint32(u)
	case *int64:
		*p, err = strconv.ParseInt(string(value), 10, 64)
	case *bool:
		*p, err = strconv.ParseBool(string(value))
	case *time.Duration:
		var ok bool
		*p, ok = parseSeconds(value)
		return ok
	case *string:
		*p = string(value)
	}
	return err == nil
}

// parseSeconds parses "s.uuuuuu" (optionally negative) as appendSeconds
// writes it.
func parseSeconds(b []byte) (time.Duration, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	sec, frac, ok := bytes.Cut(b, []byte("."))
	if !ok || len(frac) != 6 {
		return 0, false
	}
	s, err1 := strconv.ParseUint(string(sec), 10, 63)
	us, err2 := strconv.ParseUint(string(frac), 10, 32)
	if err1 != nil || err2 != nil || s > uint64(1<<63-1)/uint64(time.Second)-1 {
		return 0, false
	}
	d := time.Duration(s)*time.Second + time.Duration(us)*time.Microsecond
	if neg {
		d = -d
	}
	return d, true
}

func yamlValueError(key, value []byte) error {
	return errors.New("beanstalk: YAML: bad value " + strconv.Quote(string(value)) + " for " + string(key))
}
