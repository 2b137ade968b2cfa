package proxy_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/jobserver/journal"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/tracing"
	"github.com/jobgate/jobgate/tracing/jobctx"
)

// startGearmanTraced serves Gearman from a local engine traced by tr.
func startGearmanTraced(t *testing.T, tr *tracing.Tracer, goroutines bool) string {
	t.Helper()
	addr, _ := startGearmanTracedOn(t, tr, gearman.Config{HandlePrefix: "H:t"}, goroutines)
	return addr
}

// startGearmanTracedOn is startGearmanTraced on an engine built from ecfg;
// the server stops at the end of the test or at stop.
func startGearmanTracedOn(t *testing.T, tr *tracing.Tracer, ecfg gearman.Config, goroutines bool) (addr string, stop func()) {
	t.Helper()
	addr, stop, _ = gmServeStop(t, proxy.GearmanConfig{
		Engine:     ecfg,
		Goroutines: goroutines,
		Tracer:     tr,
	})
	return addr, stop
}

// TestGearmanTraceAfterRestart submits a traced background job to a
// journaled server, stops it, serves the same journal again and runs the
// job there: its receive and process spans join the first run's send span.
func TestGearmanTraceAfterRestart(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Gearman, tracing.Config{})
	dir := t.TempDir()
	run := func() (string, func()) {
		fj, _, err := gearman.OpenJournal(dir, journal.Options{Sync: journal.Always, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		addr, stop := startGearmanTracedOn(t, tr, gearman.Config{HandlePrefix: "H:t", Journal: fj}, false)
		return addr, func() { stop(); fj.Close() }
	}
	addr, stop := run()
	cl := gmDial(t, addr)
	cl.send(codec.SubmitJobBg, "durable", "", "data")
	h := cl.expect(codec.JobCreated)[0]
	cl.nc.Close()
	waitSpans(t, rec, 1)
	stop()

	addr, stop = run()
	defer stop()
	w := gmDial(t, addr)
	w.send(codec.CanDo, "durable")
	w.send(codec.GrabJob)
	if a := w.expect(codec.JobAssign); a[0] != h || a[2] != "data" {
		t.Fatalf("JOB_ASSIGN %q after restart", a)
	}
	w.send(codec.WorkComplete, h, "")
	w.sync()
	checkSpans(t, waitSpans(t, rec, 3), []string{
		"T1 send durable producer parent=- links=[] status=Unset messaging.destination.name=durable messaging.message.body.size=4 messaging.message.id=H:t:1 messaging.operation.name=SUBMIT_JOB_BG messaging.operation.type=send messaging.system=gearman",
		"T1 receive durable client parent=send durable links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=durable messaging.message.body.size=4 messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN messaging.operation.type=receive messaging.system=gearman wait",
		"T1 process durable consumer parent=send durable links=[] status=Unset jobgate.job.attempt=1 jobgate.job.outcome=completed messaging.destination.name=durable messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN messaging.operation.type=process messaging.system=gearman wait",
	})
}

// TestGearmanTraceForeground traces a foreground job with progress and
// data through to WORK_COMPLETE, in both serving modes.
func TestGearmanTraceForeground(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(map[bool]string{false: "loop", true: "goroutines"}[goroutines], func(t *testing.T) {
			tr, rec := recordedTracer(t, tracing.Gearman, tracing.Config{})
			addr := startGearmanTraced(t, tr, goroutines)
			cl, w := gmDial(t, addr), gmDial(t, addr)
			cl.send(codec.SubmitJob, "resize", "u1", "img")
			h := cl.expect(codec.JobCreated)[0]
			w.send(codec.CanDo, "resize")
			w.send(codec.GrabJobUniq)
			w.expect(codec.JobAssignUniq)
			w.send(codec.WorkStatus, h, "1", "2")
			w.send(codec.WorkData, h, "part")
			w.send(codec.WorkComplete, h, "done")
			cl.expect(codec.WorkStatus)
			cl.expect(codec.WorkData)
			cl.expect(codec.WorkComplete)
			checkSpans(t, waitSpans(t, rec, 3), []string{
				"T1 send resize producer parent=- links=[] status=Unset messaging.destination.name=resize messaging.message.body.size=3 messaging.message.conversation_id=u1 messaging.message.id=H:t:1 messaging.operation.name=SUBMIT_JOB messaging.operation.type=send messaging.system=gearman",
				"T1 receive resize client parent=send resize links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=resize messaging.message.body.size=3 messaging.message.conversation_id=u1 messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN_UNIQ messaging.operation.type=receive messaging.system=gearman wait",
				"T1 process resize consumer parent=send resize links=[] status=Unset jobgate.job.attempt=1 jobgate.job.outcome=completed messaging.destination.name=resize messaging.message.conversation_id=u1 messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN_UNIQ messaging.operation.type=process messaging.system=gearman wait events=WORK_STATUS{jobgate.work.denominator=2,jobgate.work.numerator=1};WORK_DATA{messaging.message.body.size=4}",
			})
		})
	}
}

// TestGearmanTraceBackgroundRetry traces a background job whose first
// worker disconnects mid-run and whose second reports WORK_FAIL; and a
// refused submit.
func TestGearmanTraceBackgroundRetry(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Gearman, tracing.Config{})
	addr := startGearmanTraced(t, tr, false)
	cl := gmDial(t, addr)
	cl.send(codec.SubmitJobBg, "mail", "", "hello")
	h := cl.expect(codec.JobCreated)[0]
	w1 := gmDial(t, addr)
	w1.send(codec.CanDo, "mail")
	w1.send(codec.GrabJob)
	w1.expect(codec.JobAssign)
	w1.nc.Close()
	waitSpans(t, rec, 3) // send, receive, process ended by the engine
	w2 := gmDial(t, addr)
	w2.send(codec.CanDo, "mail")
	w2.send(codec.GrabJob)
	w2.expect(codec.JobAssign)
	w2.send(codec.WorkWarning, h, "careful")
	w2.send(codec.WorkFail, h)
	w2.sync()
	// A submit the engine refuses: the function's queue is full.
	cl.sendText("maxqueue full 1\n")
	cl.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if f, err := cl.rd.ReadFrame(); err != nil || f.Kind != codec.KindText || string(f.Text) != "OK" {
		t.Fatalf("maxqueue: %v %q %v", f.Kind, f.Text, err)
	}
	cl.send(codec.SubmitJobBg, "full", "", "1")
	cl.expect(codec.JobCreated)
	cl.send(codec.SubmitJobBg, "full", "", "2")
	cl.expect(codec.Error)
	checkSpans(t, waitSpans(t, rec, 7), []string{
		"T1 send mail producer parent=- links=[] status=Unset messaging.destination.name=mail messaging.message.body.size=5 messaging.message.id=H:t:1 messaging.operation.name=SUBMIT_JOB_BG messaging.operation.type=send messaging.system=gearman",
		"T1 receive mail client parent=send mail links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=mail messaging.message.body.size=5 messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN messaging.operation.type=receive messaging.system=gearman wait",
		"T1 process mail consumer parent=send mail links=[] status=Error error.type=worker_lost jobgate.job.attempt=1 jobgate.job.outcome=failed messaging.destination.name=mail messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN messaging.operation.type=process messaging.system=gearman wait",
		"T1 receive mail client parent=send mail links=[=] status=Unset jobgate.job.attempt=2 messaging.destination.name=mail messaging.message.body.size=5 messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN messaging.operation.type=receive messaging.system=gearman wait",
		"T1 process mail consumer parent=send mail links=[] status=Error error.type=WORK_FAIL jobgate.job.attempt=2 jobgate.job.outcome=failed messaging.destination.name=mail messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN messaging.operation.type=process messaging.system=gearman wait events=retry{jobgate.job.attempt=2};WORK_WARNING{messaging.message.body.size=7}",
		"T2 send full producer parent=- links=[] status=Unset messaging.destination.name=full messaging.message.body.size=1 messaging.message.id=H:t:2 messaging.operation.name=SUBMIT_JOB_BG messaging.operation.type=send messaging.system=gearman",
		"T3 send full producer parent=- links=[] status=Error error.type=QUEUE_ERROR messaging.destination.name=full messaging.message.body.size=1 messaging.operation.name=SUBMIT_JOB_BG messaging.operation.type=send messaging.system=gearman",
	})
}

// TestGearmanTracePayload: with payload_traceparent on, a local job's
// JOB_ASSIGN carries the process span's context in front of the workload,
// which jobctx.Extract gives back as submitted; the spans are as without it.
func TestGearmanTracePayload(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Gearman, tracing.Config{PayloadTraceparent: true})
	addr := startGearmanTraced(t, tr, false)
	cl, w := gmDial(t, addr), gmDial(t, addr)
	cl.send(codec.SubmitJob, "resize", "", "img")
	h := cl.expect(codec.JobCreated)[0]
	w.send(codec.CanDo, "resize")
	w.send(codec.GrabJob)
	a := w.expect(codec.JobAssign)
	ctx, body := jobctx.Extract(context.Background(), []byte(a[2]))
	if string(body) != "img" || len(a[2]) != 3+jobctx.EnvelopeLen {
		t.Fatalf("JOB_ASSIGN %q", a)
	}
	w.send(codec.WorkComplete, h, "ok")
	cl.expect(codec.WorkComplete)
	spans := waitSpans(t, rec, 3)
	if sc := trace.SpanContextFromContext(ctx); sc.SpanID() != spans[2].SpanContext().SpanID() {
		t.Fatalf("envelope carries %v, process span %v", sc, spans[2].SpanContext())
	}
	checkSpans(t, spans, []string{
		"T1 send resize producer parent=- links=[] status=Unset messaging.destination.name=resize messaging.message.body.size=3 messaging.message.id=H:t:1 messaging.operation.name=SUBMIT_JOB messaging.operation.type=send messaging.system=gearman",
		"T1 receive resize client parent=send resize links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=resize messaging.message.body.size=3 messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN messaging.operation.type=receive messaging.system=gearman wait",
		"T1 process resize consumer parent=send resize links=[] status=Unset jobgate.job.attempt=1 jobgate.job.outcome=completed messaging.destination.name=resize messaging.message.id=H:t:1 messaging.operation.name=JOB_ASSIGN messaging.operation.type=process messaging.system=gearman wait",
	})
}

// TestGearmanTraceCommandSpans: with command_spans on, an admin text
// command gets a SERVER span named after it.
func TestGearmanTraceCommandSpans(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Gearman, tracing.Config{CommandSpans: true})
	addr := startGearmanTraced(t, tr, false)
	c := gmDial(t, addr)
	c.sendText("status\n")
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if f, err := c.rd.ReadFrame(); err != nil || f.Kind != codec.KindText {
		t.Fatalf("status: %v %v", f.Kind, err)
	}
	checkSpans(t, waitSpans(t, rec, 1), []string{
		"T1 status server parent=- links=[] status=Unset messaging.operation.name=status messaging.system=gearman",
	})
}
