package examples_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/jobgate/jobgate/jobserver/clock"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"
	"github.com/jobgate/jobgate/examples/beanstalk/bsexample"
)

// The worker, started first, blocks in reserve; the producer's jobs each
// reach it once, in order, and are deleted.
func TestBeanstalkProducerAndWorker(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := startBeanstalk(t)

	var workerOut bytes.Buffer
	worker := goRun(func() error {
		return bsexample.Work(ctx, bsexample.WorkerConfig{Addr: addr, Tube: "greetings", Jobs: 3}, &workerOut)
	})
	var producerOut bytes.Buffer
	ids, err := bsexample.Produce(ctx, bsexample.ProducerConfig{
		Addr: addr, Tube: "greetings", N: 3, Body: "hello %d", Priority: 10,
	}, &producerOut)
	if err != nil {
		t.Fatal(err)
	}
	wait(ctx, t, "worker", worker)

	if len(ids) != 3 || ids[0] != 1 || ids[2] != 3 {
		t.Errorf("ids %v, want [1 2 3]", ids)
	}
	want := "put 1 \"hello 1\"\nput 2 \"hello 2\"\nput 3 \"hello 3\"\n"
	if got := producerOut.String(); got != want {
		t.Errorf("producer printed:\n%s\nwant:\n%s", got, want)
	}
	want = "1 \"hello 1\" -> \"HELLO 1\"\n2 \"hello 2\" -> \"HELLO 2\"\n3 \"hello 3\" -> \"HELLO 3\"\n"
	if got := workerOut.String(); got != want {
		t.Errorf("worker printed:\n%s\nwant:\n%s", got, want)
	}
	// All three were deleted (and the tube, empty and unwatched, is gone).
	checkServer(t, addr, map[string]string{
		"total-jobs": "3", "cmd-delete": "3", "current-jobs-ready": "0", "current-jobs-reserved": "0",
		"current-jobs-delayed": "0", "current-jobs-buried": "0",
	})
}

// Priorities decide the order of ready jobs, and a delayed job is not
// ready until its delay has passed (on the engine's fake clock, so the
// test does not depend on how fast the machine is).
func TestBeanstalkPriorityAndDelay(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	addr := startBeanstalkWith(t, clk)

	produce := func(cfg bsexample.ProducerConfig) {
		t.Helper()
		cfg.Addr, cfg.Tube = addr, "work"
		if _, err := bsexample.Produce(ctx, cfg, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
	}
	produce(bsexample.ProducerConfig{N: 1, Body: "later", Priority: 0, Delay: time.Second})
	produce(bsexample.ProducerConfig{N: 2, Body: "routine %d", Priority: 100})
	produce(bsexample.ProducerConfig{N: 1, Body: "urgent", Priority: 1})
	checkJob(t, addr, 1, map[string]string{"state": "delayed", "pri": "0", "delay": "1"})

	var workerOut bytes.Buffer
	if err := bsexample.Work(ctx, bsexample.WorkerConfig{Addr: addr, Tube: "work", Jobs: 3}, &workerOut); err != nil {
		t.Fatal(err)
	}
	// Job 1 has the most urgent priority but is not ready yet.
	checkJob(t, addr, 1, map[string]string{"state": "delayed"})
	clk.Advance(time.Second)
	if err := bsexample.Work(ctx, bsexample.WorkerConfig{Addr: addr, Tube: "work", Jobs: 1}, &workerOut); err != nil {
		t.Fatal(err)
	}
	want := `4 "urgent" -> "URGENT"
2 "routine 1" -> "ROUTINE 1"
3 "routine 2" -> "ROUTINE 2"
1 "later" -> "LATER"
`
	if got := workerOut.String(); got != want {
		t.Errorf("worker printed:\n%s\nwant:\n%s", got, want)
	}
}

// A job that keeps failing is released (tried again at once, here) until
// the server's release count says it has had its attempts, then buried;
// the jobs around it are unaffected.
func TestBeanstalkWorkerBuriesAfterAttempts(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := startBeanstalk(t)

	if _, err := bsexample.Produce(ctx, bsexample.ProducerConfig{Addr: addr, N: 3}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var workerOut bytes.Buffer
	cfg := bsexample.WorkerConfig{Addr: addr, Jobs: 3, MaxAttempts: 3, FailOn: "2"}
	if err := bsexample.Work(ctx, cfg, &workerOut); err != nil {
		t.Fatal(err)
	}
	// A released job keeps its priority and id, so it is reserved again
	// before job 3.
	want := `1 "job 1" -> "JOB 1"
2 "job 2": attempt 1 of 3 failed: body contains the -fail string; released, retry in 0s
2 "job 2": attempt 2 of 3 failed: body contains the -fail string; released, retry in 0s
2 "job 2": attempt 3 of 3 failed: body contains the -fail string; buried
3 "job 3" -> "JOB 3"
`
	if got := workerOut.String(); got != want {
		t.Errorf("worker printed:\n%s\nwant:\n%s", got, want)
	}
	checkJob(t, addr, 2, map[string]string{"state": "buried", "releases": "2", "buries": "1", "reserves": "3"})
	checkTube(t, addr, "default", map[string]string{
		"total-jobs": "3", "current-jobs-ready": "0", "current-jobs-buried": "1",
	})
}

// A released job waits out the retry delay before it is reserved again:
// the worker stays blocked until the engine's fake clock passes the delay.
func TestBeanstalkWorkerRetryDelay(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	addr := startBeanstalkWith(t, clk)

	if _, err := bsexample.Produce(ctx, bsexample.ProducerConfig{Addr: addr, N: 1, Body: "bad"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var workerOut bytes.Buffer
	cfg := bsexample.WorkerConfig{Addr: addr, Jobs: 1, MaxAttempts: 2, RetryDelay: time.Second, FailOn: "bad"}
	worker := goRun(func() error { return bsexample.Work(ctx, cfg, &workerOut) })

	// Wait for the release, then for the worker to block in reserve again.
	waitStat(ctx, t, addr, 1, "state", "delayed")
	clk.Advance(999 * time.Millisecond)
	checkJob(t, addr, 1, map[string]string{"state": "delayed", "reserves": "1"})
	clk.Advance(time.Millisecond)
	wait(ctx, t, "worker", worker)
	want := `1 "bad": attempt 1 of 2 failed: body contains the -fail string; released, retry in 1s
1 "bad": attempt 2 of 2 failed: body contains the -fail string; buried
`
	if got := workerOut.String(); got != want {
		t.Errorf("worker printed:\n%s\nwant:\n%s", got, want)
	}
}

// waitStat polls stats-job until key has the value want, or ctx ends.
func waitStat(ctx context.Context, t *testing.T, addr string, id uint64, key, want string) {
	t.Helper()
	c, err := beanstalk.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for {
		got, err := c.StatsJob(id)
		if err == nil && got[key] == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stats-job %d: %s never became %q (last %q, %v)", id, key, want, got[key], err)
		case <-time.After(time.Millisecond):
		}
	}
}

// Cancelling the context stops a worker blocked in reserve.
func TestBeanstalkWorkerStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := startBeanstalk(t)
	wctx, cancel := context.WithCancel(ctx)
	worker := goRun(func() error {
		return bsexample.Work(wctx, bsexample.WorkerConfig{Addr: addr, Tube: "idle"}, &bytes.Buffer{})
	})
	// Wait until the worker is blocked in reserve, so that the cancel
	// interrupts it rather than the dial.
	for {
		st := tubeStats(t, addr, "idle")
		if st["current-waiting"] == "1" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-worker:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("worker returned %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("worker did not stop")
	}
}

// tubeStats returns stats-tube for tube, or nil if the tube does not exist.
func tubeStats(t *testing.T, addr, tube string) map[string]string {
	t.Helper()
	c, err := beanstalk.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := beanstalk.NewTube(c, tube).Stats()
	if errors.Is(err, beanstalk.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkTube fails the test unless stats-tube shows want.
func checkTube(t *testing.T, addr, tube string, want map[string]string) {
	t.Helper()
	got := tubeStats(t, addr, tube)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stats-tube %s: %s is %q, want %q", tube, k, got[k], v)
		}
	}
}

// checkServer fails the test unless the server's stats show want.
func checkServer(t *testing.T, addr string, want map[string]string) {
	t.Helper()
	c, err := beanstalk.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stats: %s is %q, want %q", k, got[k], v)
		}
	}
}

// checkJob fails the test unless stats-job shows want.
func checkJob(t *testing.T, addr string, id uint64, want map[string]string) {
	t.Helper()
	c, err := beanstalk.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.StatsJob(id)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stats-job %d: %s is %q, want %q", id, k, got[k], v)
		}
	}
}
