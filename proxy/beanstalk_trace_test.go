package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"
	"go.opentelemetry.io/otel/trace"

	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/tracing"
	"github.com/jobgate/jobgate/tracing/jobctx"
)

// startBeanstalkTraced serves Beanstalk with tracer tr on an engine built
// from ecfg. The server stops at the end of the test or at stop.
func startBeanstalkTraced(t testing.TB, tr *tracing.Tracer, ecfg engine.Config) (addr string, stop func()) {
	t.Helper()
	addr, stop, _ = bsServeStop(t, proxy.BeanstalkConfig{EngineConfig: ecfg, Tracer: tr})
	return addr, stop
}

// bsReleaseRetry puts a job on tube emails with prod, reserves it with
// work, releases it for a retry, reserves it again, touches and deletes
// it: the scenario the trace tests expect spans of. It returns the job id
// and the tube and tube set, for the tests' next jobs.
func bsReleaseRetry(t *testing.T, prod, work *gobeanstalk.Conn) (uint64, *gobeanstalk.Tube, *gobeanstalk.TubeSet) {
	t.Helper()
	tube := gobeanstalk.NewTube(prod, "emails")
	ts := gobeanstalk.NewTubeSet(work, "emails")

	id, err := tube.Put([]byte("hello"), 10, 0, time.Minute)
	must(t, err)
	rid, _, err := ts.Reserve(time.Second)
	must(t, err)
	if rid != id {
		t.Fatalf("reserved %d, want %d", rid, id)
	}
	must(t, work.Release(id, 7, 0))
	_, _, err = ts.Reserve(time.Second)
	must(t, err)
	must(t, work.Touch(id))
	must(t, work.Delete(id))
	return id, tube, ts
}

// TestBeanstalkTraceReleaseRetry traces a job through put, a reservation
// released for a retry, and a second reservation deleted; then a job whose
// TTR runs out (fake clock) and which is then buried; and a put with no
// reservation. Clients: go-beanstalk.
func TestBeanstalkTraceReleaseRetry(t *testing.T) { bsBothPaths(t, testBeanstalkTraceReleaseRetry) }

func testBeanstalkTraceReleaseRetry(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Beanstalk, tracing.Config{})
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	addr, _ := startBeanstalkTraced(t, tr, engine.Config{Clock: clk})
	prod := bgwDial(t, addr)
	work := bgwDial(t, addr)
	_, tube, ts := bsReleaseRetry(t, prod, work)
	spans := waitSpans(t, rec, 5)
	checkSpans(t, spans, []string{
		"T1 send emails producer parent=- links=[] status=Unset messaging.destination.name=emails messaging.message.body.size=5 messaging.message.id=1 messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk",
		"T1 receive emails client parent=send emails links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=emails messaging.message.body.size=5 messaging.message.id=1 messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk wait",
		"T1 process emails consumer parent=send emails links=[] status=Unset jobgate.job.attempt=1 jobgate.job.outcome=released messaging.destination.name=emails messaging.message.id=1 messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk wait events=release{jobgate.job.delay_ms=0,jobgate.job.priority=7}",
		"T1 receive emails client parent=send emails links=[=] status=Unset jobgate.job.attempt=2 messaging.destination.name=emails messaging.message.body.size=5 messaging.message.id=1 messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk wait",
		"T1 process emails consumer parent=send emails links=[] status=Unset jobgate.job.attempt=2 jobgate.job.outcome=completed messaging.destination.name=emails messaging.message.id=1 messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk wait events=retry{jobgate.job.attempt=2};touch",
	})
	rec.Reset()

	// TTR expiry, then a bury.
	id2, err := tube.Put([]byte("x"), 1, 0, 2*time.Second)
	must(t, err)
	_, _, err = ts.Reserve(time.Second)
	must(t, err)
	waitSpans(t, rec, 2) // send, receive
	clk.Advance(3 * time.Second)
	waitSpans(t, rec, 3) // the process span ended by the engine's timer
	rid, _, err := ts.Reserve(time.Second)
	must(t, err)
	if rid != id2 {
		t.Fatalf("reserved %d, want %d", rid, id2)
	}
	must(t, work.Bury(id2, 4))
	spans = waitSpans(t, rec, 5)
	checkSpans(t, spans, []string{
		"T1 send emails producer parent=- links=[] status=Unset messaging.destination.name=emails messaging.message.body.size=1 messaging.message.id=2 messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk",
		"T1 receive emails client parent=send emails links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=emails messaging.message.body.size=1 messaging.message.id=2 messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk wait",
		"T1 process emails consumer parent=send emails links=[] status=Error error.type=ttr_expired jobgate.job.attempt=1 jobgate.job.outcome=ttr_expired messaging.destination.name=emails messaging.message.id=2 messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk wait events=ttr_expired",
		"T1 receive emails client parent=send emails links=[=] status=Unset jobgate.job.attempt=2 messaging.destination.name=emails messaging.message.body.size=1 messaging.message.id=2 messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk wait",
		"T1 process emails consumer parent=send emails links=[] status=Error error.type=bury jobgate.job.attempt=2 jobgate.job.outcome=buried messaging.destination.name=emails messaging.message.id=2 messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk wait events=retry{jobgate.job.attempt=2};bury{jobgate.job.priority=4}",
	})
}

// TestBeanstalkTraceAfterRestart puts a traced job on a journaled server,
// stops it, starts another on the same journal and reserves the job there:
// the receive and process spans join the send span of the first run.
func TestBeanstalkTraceAfterRestart(t *testing.T) { bsBothPaths(t, testBeanstalkTraceAfterRestart) }

func testBeanstalkTraceAfterRestart(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Beanstalk, tracing.Config{})
	dir := t.TempDir()
	run := func() (string, func()) {
		fj, _, err := engine.OpenJournal(dir, journal.Options{Sync: journal.Always, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		addr, stop := startBeanstalkTraced(t, tr, engine.Config{Journal: fj})
		return addr, func() { stop(); fj.Close() }
	}
	addr, stop := run()
	c := bgwDial(t, addr)
	id, err := c.Put([]byte("durable"), 1, 0, time.Minute)
	must(t, err)
	c.Close()
	waitSpans(t, rec, 1)
	stop()

	addr, stop = run()
	defer stop()
	w := bgwDial(t, addr)
	rid, body, err := w.Reserve(time.Second)
	must(t, err)
	if rid != id || string(body) != "durable" {
		t.Fatalf("reserved %d %q", rid, body)
	}
	must(t, w.Delete(id))
	checkSpans(t, waitSpans(t, rec, 3), []string{
		"T1 send default producer parent=- links=[] status=Unset messaging.destination.name=default messaging.message.body.size=7 messaging.message.id=1 messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk",
		"T1 receive default client parent=send default links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=default messaging.message.body.size=7 messaging.message.id=1 messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk wait",
		"T1 process default consumer parent=send default links=[] status=Unset jobgate.job.attempt=1 jobgate.job.outcome=completed messaging.destination.name=default messaging.message.id=1 messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk wait",
	})
}

// TestBeanstalkTracePayload: with payload_traceparent on, a reserved job's
// body carries the process span's context, which jobctx.Extract gives the
// worker back with the body as put; peek still shows the stored body.
func TestBeanstalkTracePayload(t *testing.T) { bsBothPaths(t, testBeanstalkTracePayload) }

func testBeanstalkTracePayload(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Beanstalk, tracing.Config{PayloadTraceparent: true})
	addr, _ := startBeanstalkTraced(t, tr, engine.Config{})
	c := bgwDial(t, addr)
	id, err := c.Put([]byte(`{"w":800}`), 1, 0, time.Minute)
	must(t, err)
	_, body, err := c.Reserve(time.Second)
	must(t, err)
	if len(body) != len(`{"w":800}`)+jobctx.EnvelopeLen {
		t.Fatalf("reserved body %q: no envelope", body)
	}
	ctx, got := jobctx.Extract(context.Background(), body)
	if string(got) != `{"w":800}` {
		t.Fatalf("extracted body %q", got)
	}
	if peeked, err := c.Peek(id); err != nil || string(peeked) != `{"w":800}` {
		t.Fatalf("peek %q %v: the stored body must stay as put", peeked, err)
	}
	must(t, c.Delete(id))
	spans := waitSpans(t, rec, 3)
	proc := spans[2]
	if proc.Name() != "process default" || trace.SpanContextFromContext(ctx).SpanID() != proc.SpanContext().SpanID() ||
		trace.SpanContextFromContext(ctx).TraceID() != proc.SpanContext().TraceID() {
		t.Fatalf("envelope carries %v, process span is %v", trace.SpanContextFromContext(ctx), proc.SpanContext())
	}
}

// TestBeanstalkTracePayloadLarge: large bodies (which the event loop
// writes from the job, by reference) with a traceparent envelope, reserved
// by pipelined commands: each reply carries its own job's body, though the
// envelopes share the connection's buffer.
func TestBeanstalkTracePayloadLarge(t *testing.T) { bsBothPaths(t, testBeanstalkTracePayloadLarge) }

func testBeanstalkTracePayloadLarge(t *testing.T) {
	tr, _ := recordedTracer(t, tracing.Beanstalk, tracing.Config{PayloadTraceparent: true})
	addr, _ := startBeanstalkTraced(t, tr, engine.Config{})
	bodies := []string{strings.Repeat("a", 3000), strings.Repeat("b", 3000)}
	c := bgwDial(t, addr)
	for _, body := range bodies {
		_, err := c.Put([]byte(body), 1, 0, time.Minute)
		must(t, err)
	}
	nc, err := net.Dial("tcp", addr)
	must(t, err)
	defer nc.Close()
	must(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(nc, "reserve\r\nreserve\r\n")
	must(t, err)
	br := bufio.NewReader(nc)
	for i, want := range bodies {
		var id, n int
		line, err := br.ReadString('\n')
		must(t, err)
		if _, err := fmt.Sscanf(line, "RESERVED %d %d\r\n", &id, &n); err != nil {
			t.Fatalf("reply %d: %q", i, line)
		}
		body := make([]byte, n+2)
		_, err = io.ReadFull(br, body)
		must(t, err)
		if _, got := jobctx.Extract(context.Background(), body[:n]); string(got) != want || string(body[n:]) != "\r\n" {
			t.Fatalf("reply %d (job %d) carries %q..., want %q...", i, id, got[:min(len(got), 8)], want[:8])
		}
	}
}

// TestBeanstalkTraceCommandSpans: with command_spans on, stats and peek
// commands get a SERVER span each, failed ones with error.type; off (the
// other tests), they get none.
func TestBeanstalkTraceCommandSpans(t *testing.T) { bsBothPaths(t, testBeanstalkTraceCommandSpans) }

func testBeanstalkTraceCommandSpans(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Beanstalk, tracing.Config{CommandSpans: true})
	addr, _ := startBeanstalkTraced(t, tr, engine.Config{})
	c := bgwDial(t, addr)
	if _, err := c.Stats(); err != nil {
		t.Fatal(err)
	}
	if _, err := gobeanstalk.NewTube(c, "t1").Stats(); err == nil {
		t.Fatal("stats-tube of an unknown tube succeeded")
	}
	checkSpans(t, waitSpans(t, rec, 2), []string{
		"T1 stats server parent=- links=[] status=Unset messaging.operation.name=stats messaging.system=beanstalk",
		"T2 stats-tube server parent=- links=[] status=Error error.type=NOT_FOUND messaging.destination.name=t1 messaging.operation.name=stats-tube messaging.system=beanstalk",
	})
}
