package proxy

import wire "github.com/jobgate/jobgate/codec/beanstalk"

// serverCounters are the stats fields that add up across servers.
func serverCounters(s *wire.ServerStats) []*uint64 {
	return []*uint64{&s.CurrentJobsUrgent, &s.CurrentJobsReady, &s.CurrentJobsReserved,
		&s.CurrentJobsDelayed, &s.CurrentJobsBuried, &s.CmdPut, &s.CmdPeek, &s.CmdPeekReady,
		&s.CmdPeekDelayed, &s.CmdPeekBuried, &s.CmdReserve, &s.CmdReserveWithTimeout,
		&s.CmdDelete, &s.CmdRelease, &s.CmdUse, &s.CmdWatch, &s.CmdIgnore, &s.CmdBury,
		&s.CmdKick, &s.CmdTouch, &s.CmdStats, &s.CmdStatsJob, &s.CmdStatsTube,
		&s.CmdListTubes, &s.CmdListTubeUsed, &s.CmdListTubesWatched, &s.CmdPauseTube,
		&s.JobTimeouts, &s.TotalJobs, &s.CurrentConnections, &s.CurrentProducers,
		&s.CurrentWorkers, &s.CurrentWaiting, &s.TotalConnections}
}

// addServerStats adds st to sum: counters summed (stats then puts the
// gateway's own connection and command counts over theirs), max-job-size the
// smallest (what fits everywhere), draining if any is; the process fields
// (pid, version, rusage, uptime, binlog, id, hostname, os, platform) stay
// the first server's. first copies st.
func addServerStats(sum, st *wire.ServerStats, first bool) {
	if first {
		*sum = *st
		return
	}
	a, b := serverCounters(sum), serverCounters(st)
	for i := range a {
		*a[i] += *b[i]
	}
	sum.MaxJobSize = min(sum.MaxJobSize, st.MaxJobSize)
	sum.Draining = sum.Draining || st.Draining
}

// addTubeStats adds st to sum as addServerStats does, but for what the
// gateway does on every backend of the tube's pool at once: a watch, a
// waiting reserve and pause-tube reach each backend, so each backend's
// current-watching, current-waiting and cmd-pause-tube already count
// every client that came through a gateway, and summing would count each
// once per backend. Those, and the pause, take the largest.
func addTubeStats(sum, st *wire.TubeStats, first bool) {
	if first {
		*sum = *st
		return
	}
	a := []*uint64{&sum.CurrentJobsUrgent, &sum.CurrentJobsReady, &sum.CurrentJobsReserved,
		&sum.CurrentJobsDelayed, &sum.CurrentJobsBuried, &sum.TotalJobs, &sum.CurrentUsing, &sum.CmdDelete}
	b := []*uint64{&st.CurrentJobsUrgent, &st.CurrentJobsReady, &st.CurrentJobsReserved,
		&st.CurrentJobsDelayed, &st.CurrentJobsBuried, &st.TotalJobs, &st.CurrentUsing, &st.CmdDelete}
	for i := range a {
		*a[i] += *b[i]
	}
	sum.CurrentWatching = max(sum.CurrentWatching, st.CurrentWatching)
	sum.CurrentWaiting = max(sum.CurrentWaiting, st.CurrentWaiting)
	sum.CmdPauseTube = max(sum.CmdPauseTube, st.CmdPauseTube)
	sum.Pause = max(sum.Pause, st.Pause)
	sum.PauseTimeLeft = max(sum.PauseTimeLeft, st.PauseTimeLeft)
}
