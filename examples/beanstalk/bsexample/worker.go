package bsexample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/beanstalkd/go-beanstalk"
)

// WorkerConfig configures Work.
type WorkerConfig struct {
	// Addr is the server's host:port.
	Addr string
	// Tube is the tube to take jobs from. Default "default".
	Tube string
	// Jobs is how many jobs to finish (delete or bury) before returning;
	// 0 means until ctx is cancelled. Releases do not count: a released
	// job comes back.
	Jobs int
	// MaxAttempts is how many times a job may fail before it is buried
	// instead of released. Default 3.
	MaxAttempts int
	// RetryDelay is how long a released job waits before it is ready
	// again, so that a failing job does not spin. Beanstalk counts in whole
	// seconds (rounded down); 0 makes it ready at once.
	RetryDelay time.Duration
	// FailOn makes processing fail for bodies that contain it, to show
	// releases and burying; empty means nothing fails.
	FailOn string
}

// reserveTimeout bounds one reserve. The worker waits for jobs indefinitely
// (cancelling ctx interrupts it), but go-beanstalk only offers
// reserve-with-timeout, so it asks again after each timeout.
const reserveTimeout = time.Hour

// Work takes jobs from cfg.Tube and processes them: it uppercases the body
// and prints one line per job to out, then deletes the job. When processing
// fails it asks the server how many times the job was released before
// (stats-job), and releases it again after cfg.RetryDelay, or buries it once
// it has failed cfg.MaxAttempts times; either way it prints what it did.
//
// Work returns nil once it has finished cfg.Jobs jobs, ctx.Err() when ctx is
// cancelled, and otherwise the connection's or the server's error.
func Work(ctx context.Context, cfg WorkerConfig, out io.Writer) (err error) {
	if cfg.Tube == "" {
		cfg.Tube = "default"
	}
	if cfg.MaxAttempts < 1 {
		cfg.MaxAttempts = 3
	}
	conn, err := dial(ctx, cfg.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer func() { err = cause(ctx, err) }()

	// A TubeSet "watches" its tubes (and ignores "default" if it is not one
	// of them) before its first reserve.
	tubes := beanstalk.NewTubeSet(conn.Conn, cfg.Tube)
	for done := 0; cfg.Jobs == 0 || done < cfg.Jobs; {
		id, body, err := tubes.Reserve(reserveTimeout)
		switch {
		case errors.Is(err, beanstalk.ErrTimeout):
			continue // no job within reserveTimeout: wait again
		case errors.Is(err, beanstalk.ErrDeadline):
			// DEADLINE_SOON: a job this connection holds is about to
			// reach its TTR. This worker holds none while reserving.
			continue
		case err != nil:
			return err
		}

		finished, err := handle(conn, cfg, id, body, out)
		if err != nil {
			return err
		}
		if finished {
			done++
		}
	}
	return nil
}

// handle processes one reserved job and settles it with the server. It
// reports whether the job is finished (deleted or buried) rather than
// released to come back.
func handle(c conn, cfg WorkerConfig, id uint64, body []byte, out io.Writer) (finished bool, err error) {
	result, perr := process(body, cfg.FailOn)
	if perr == nil {
		if err := c.Delete(id); err != nil {
			return false, lost(err, id, out)
		}
		fmt.Fprintf(out, "%d %q -> %q\n", id, body, result)
		return true, nil
	}

	// The server counts the job's releases (and keeps its priority), so
	// the worker needs no state of its own to know this is attempt n: any
	// worker that reserves the job next sees the same count.
	stats, err := c.StatsJob(id)
	if err != nil {
		return false, lost(err, id, out)
	}
	releases, err := strconv.Atoi(stats["releases"])
	if err != nil {
		return false, fmt.Errorf("stats-job %d: releases %q: %w", id, stats["releases"], err)
	}
	pri, err := strconv.ParseUint(stats["pri"], 10, 32)
	if err != nil {
		return false, fmt.Errorf("stats-job %d: pri %q: %w", id, stats["pri"], err)
	}
	attempt := releases + 1
	if attempt >= cfg.MaxAttempts {
		if err := c.Bury(id, uint32(pri)); err != nil {
			return false, lost(err, id, out)
		}
		fmt.Fprintf(out, "%d %q: attempt %d of %d failed: %v; buried\n", id, body, attempt, cfg.MaxAttempts, perr)
		return true, nil
	}
	if err := c.Release(id, uint32(pri), cfg.RetryDelay); err != nil {
		return false, lost(err, id, out)
	}
	fmt.Fprintf(out, "%d %q: attempt %d of %d failed: %v; released, retry in %v\n", id, body, attempt, cfg.MaxAttempts, perr, cfg.RetryDelay)
	return false, nil
}

// lost turns NOT_FOUND on a job the worker had reserved into a printed
// note: the job's TTR ran out, so the server gave it back to the tube (and
// maybe to another worker) and it is no longer this worker's to settle.
// Any other error is returned.
func lost(err error, id uint64, out io.Writer) error {
	if errors.Is(err, beanstalk.ErrNotFound) {
		fmt.Fprintf(out, "%d: no longer reserved (TTR expired?); left to the server\n", id)
		return nil
	}
	return err
}

// errFailOn is the processing error for a body containing FailOn.
var errFailOn = errors.New("body contains the -fail string")

// process is the job's work: the body in upper case (bytes.ToUpper),
// or errFailOn when the body contains failOn.
func process(body []byte, failOn string) ([]byte, error) {
	if failOn != "" && bytes.Contains(body, []byte(failOn)) {
		return nil, errFailOn
	}
	return bytes.ToUpper(body), nil
}
