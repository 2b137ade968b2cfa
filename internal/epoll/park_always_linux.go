package epoll

import "sync/atomic"

// Parking with more than one P (jobgate's loop_wait: park).
//
// A loop blocked in epoll_pwait through the system call keeps its P, and
// its goroutine is never rescheduled, so every ~10 ms sysmon finds the P
// on the same scheduling tick and forces a preemption: with the loop in
// the wait it takes the P away, in Go code it signals the thread, and
// the preempted goroutine often resumes on another thread that
// runtime.wakep started on the other CPU. Each forced preemption also
// puts sysmon back to 20 µs naps, so it wakes about a thousand times a
// second. On two CPUs shared with a load generator, those wakeups and
// thread hops land between requests and widen the latency tail
// (docs/BENCHMARKS.md, "Tail latency on two CPUs"). Parked on the
// netpoller, the loop goes through the scheduler at every wait: its tick
// moves, nothing is preempted, sysmon sleeps, and the process runs on one
// thread the way gearmand and beanstalkd do. The price is the
// scheduler's path around each wait, 2 to 8 µs of CPU: nothing when
// waits are rare (many busy connections), a quarter more CPU per request
// when the loop waits for every request (one client); and on a busy
// shared machine a parked loop lost half its rate in some runs (not under
// a plain busy loop: the cause is open). Hence opt-in.

// parkAlways is SetParkAlways' setting.
var parkAlways atomic.Bool

// SetParkAlways makes the pollers NewWoken opens from now on park on the
// runtime's netpoller when they wait (Park), whatever GOMAXPROCS is;
// false (the default) parks only with one P (ParkWhenAlone). Pollers
// already open keep what they chose.
func SetParkAlways(on bool) { parkAlways.Store(on) }
