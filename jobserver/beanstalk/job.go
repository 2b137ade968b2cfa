package beanstalk

// Job states. A job is in exactly one container per state: its tube's ready,
// delay or buried heap, or its reserving session's reserved heap.
const (
	stateReady uint8 = iota + 1
	stateReserved
	stateDelayed
	stateBuried
	// statePending is a put whose record is not durable yet: in the job
	// table (so compaction keeps its record) but in no container, and
	// invisible to commands (Engine.visible).
	statePending
)

var stateNames = [...]string{
	stateReady:    "ready",
	stateReserved: "reserved",
	stateDelayed:  "delayed",
	stateBuried:   "buried",
	statePending:  "pending",
}

// job is one job. It is kept at 96 bytes (a Go size class) because the
// memory per queued job is a target: no back pointer to the reserving
// session (ownership is checked through the session's heap), times as
// int64 nanoseconds since the engine started, durations in whole seconds.
type job struct {
	id uint64
	// created is when the job was put, in engine nanoseconds.
	created int64
	// deadline is when a delayed job becomes ready or a reserved job's TTR
	// runs out, in engine nanoseconds; for a buried job it is the burial
	// sequence number that keeps the buried heap FIFO.
	deadline int64
	tube     *tube
	// body is the job's bytes without the trailing "\r\n". It is never
	// modified after put, so replies may alias it.
	body []byte
	// idx is the position in whichever heap holds the job.
	idx   int32
	pri   uint32
	delay uint32 // seconds, as last set by put or release
	ttr   uint32 // seconds, at least 1

	reserves, timeouts, releases, buries, kicks uint32

	state uint8
	// traced says the job has a trace in the job table (tracetable.go);
	// it fills padding, so the struct stays 96 bytes.
	traced bool
}

// urgentThreshold is beanstalkd's: ready jobs below this priority count as
// "urgent" in the stats.
const urgentThreshold = 1024
