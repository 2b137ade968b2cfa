package examples_test

import (
	"context"
	"log/slog"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy"
)

// testTimeout bounds each test: every wait in these tests is on a context
// derived from it, so a hang fails the test instead of the whole run.
const testTimeout = 10 * time.Second

// testContext returns a context that ends with the test or after
// testTimeout.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// startGearman starts an in-process jobgate Gearman server. Its handles are
// "H:test:<n>", so that outputs can be compared exactly.
func startGearman(t *testing.T) string {
	t.Helper()
	srv, err := proxy.NewGearmanServer(proxy.GearmanConfig{
		Engine: gearman.Config{HandlePrefix: "H:test"},
		Log:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return testutil.Serve(t, srv)
}

// startBeanstalk starts an in-process jobgate Beanstalk server.
func startBeanstalk(t *testing.T) string {
	t.Helper()
	return startBeanstalkWith(t, nil)
}

// startBeanstalkWith starts a Beanstalk server whose engine runs on clk
// (nil: the real clock), so tests of delays can move time by hand.
func startBeanstalkWith(t *testing.T, clk clock.Clock) string {
	t.Helper()
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{EngineConfig: engine.Config{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	return testutil.Serve(t, srv)
}

// goRun runs fn in a goroutine and returns a channel that yields its error.
// Tests read fn's output only after receiving from the channel, so the
// buffer it writes to is never shared while it runs.
func goRun(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return done
}

// wait receives fn's result from done, failing the test if it is an error or
// does not come before ctx ends.
func wait(ctx context.Context, t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-ctx.Done():
		t.Fatalf("%s: %v", what, ctx.Err())
	}
}

// startProcess starts a long-running command and stops it by PID when the
// test ends: SIGTERM, then SIGKILL if it has not exited within 5s.
func startProcess(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
}
