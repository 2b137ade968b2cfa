package proxy_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/tracing"
	"github.com/jobgate/jobgate/tracing/jobctx"
)

// TestGearmanGatewayTrace traces a foreground job through a gateway to a
// real gearmand: the spans carry the upstream's address and the
// client-visible handle, and a worker that disconnects mid-job ends its
// process span before the retry's pair starts.
func TestGearmanGatewayTrace(t *testing.T) {
	up := testutil.StartGearmand(t)
	addr, rec := startTracedGateway(t, up, tracing.Config{})

	cl := gmDial(t, addr)
	cl.send(codec.SubmitJob, "gw", "u7", "payload")
	h := cl.expect(codec.JobCreated)[0]
	w1 := gmDial(t, addr)
	w1.send(codec.CanDo, "gw")
	w1.send(codec.GrabJobUniq)
	if got := w1.expect(codec.JobAssignUniq)[0]; got != h {
		t.Fatalf("assigned %s, submitted %s", got, h)
	}
	w1.nc.Close()
	waitSpans(t, rec, 3)
	w2 := gmDial(t, addr)
	w2.send(codec.CanDo, "gw")
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; { // gearmand requeues once it notices
		w2.send(codec.GrabJobUniq)
		nc := w2.nc
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		f, err := w2.rd.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Packet.Type == codec.JobAssignUniq {
			got = []string{string(f.Packet.Args[0])}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not come back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got[0] != h {
		t.Fatalf("reassigned %s, want %s", got[0], h)
	}
	w2.send(codec.WorkStatus, h, "3", "4")
	w2.send(codec.WorkComplete, h, "ok")
	cl.expect(codec.WorkStatus)
	cl.expect(codec.WorkComplete)

	host, port, _ := net.SplitHostPort(up)
	server := "server.address=" + host + " server.port=" + port
	want := []string{
		"T1 send gw producer parent=- links=[] status=Unset messaging.destination.name=gw messaging.message.body.size=7 messaging.message.conversation_id=u7 messaging.message.id=HANDLE messaging.operation.name=SUBMIT_JOB messaging.operation.type=send messaging.system=gearman SERVER",
		"T1 receive gw client parent=send gw links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=gw messaging.message.body.size=7 messaging.message.conversation_id=u7 messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN_UNIQ messaging.operation.type=receive messaging.system=gearman SERVER wait",
		"T1 process gw consumer parent=send gw links=[] status=Error error.type=worker_lost jobgate.job.attempt=1 jobgate.job.outcome=failed messaging.destination.name=gw messaging.message.conversation_id=u7 messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN_UNIQ messaging.operation.type=process messaging.system=gearman SERVER wait",
		"T1 receive gw client parent=send gw links=[=] status=Unset jobgate.job.attempt=2 messaging.destination.name=gw messaging.message.body.size=7 messaging.message.conversation_id=u7 messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN_UNIQ messaging.operation.type=receive messaging.system=gearman SERVER wait",
		"T1 process gw consumer parent=send gw links=[] status=Unset jobgate.job.attempt=2 jobgate.job.outcome=completed messaging.destination.name=gw messaging.message.conversation_id=u7 messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN_UNIQ messaging.operation.type=process messaging.system=gearman SERVER wait events=retry{jobgate.job.attempt=2};WORK_STATUS{jobgate.work.denominator=4,jobgate.work.numerator=3}",
	}
	for i := range want {
		want[i] = strings.NewReplacer("HANDLE", h, "SERVER", server).Replace(want[i])
	}
	checkSpans(t, waitSpans(t, rec, 5), want)
}

// TestGearmanGatewayTraceCoalesced: a second submit with the same unique
// id, coalesced by gearmand onto the queued job, gets its own send span;
// the job stays in the trace of the submit that created it.
func TestGearmanGatewayTraceCoalesced(t *testing.T) {
	up := testutil.StartGearmand(t)
	addr, rec := startTracedGateway(t, up, tracing.Config{})
	c1, c2 := gmDial(t, addr), gmDial(t, addr)
	c1.send(codec.SubmitJobBg, "gwc", "u9", "one")
	h := c1.expect(codec.JobCreated)[0]
	c2.send(codec.SubmitJobBg, "gwc", "u9", "two")
	if h2 := c2.expect(codec.JobCreated)[0]; h2 != h {
		t.Fatalf("second submit got %s, first %s: not coalesced", h2, h)
	}
	w := gmDial(t, addr)
	w.send(codec.CanDo, "gwc")
	w.send(codec.GrabJob)
	if got := w.expect(codec.JobAssign)[0]; got != h {
		t.Fatalf("assigned %s, submitted %s", got, h)
	}
	w.send(codec.WorkComplete, h, "")

	host, port, _ := net.SplitHostPort(up)
	server := "server.address=" + host + " server.port=" + port
	send := "send gwc producer parent=- links=[] status=Unset messaging.destination.name=gwc messaging.message.body.size=3 messaging.message.conversation_id=u9 messaging.message.id=HANDLE messaging.operation.name=SUBMIT_JOB_BG messaging.operation.type=send messaging.system=gearman SERVER"
	want := []string{
		"T1 " + send,
		"T2 " + send,
		"T1 receive gwc client parent=send gwc links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=gwc messaging.message.body.size=3 messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN messaging.operation.type=receive messaging.system=gearman SERVER wait",
		"T1 process gwc consumer parent=send gwc links=[] status=Unset jobgate.job.attempt=1 jobgate.job.outcome=completed messaging.destination.name=gwc messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN messaging.operation.type=process messaging.system=gearman SERVER wait",
	}
	for i := range want {
		want[i] = strings.NewReplacer("HANDLE", h, "SERVER", server).Replace(want[i])
	}
	checkSpans(t, waitSpans(t, rec, 4), want)
}

// startTracedGateway serves a Gearman gateway to the gearmand at up,
// traced with cfg's switches into the returned recorder.
func startTracedGateway(t *testing.T, up string, cfg tracing.Config) (string, *tracetest.SpanRecorder) {
	t.Helper()
	c, err := config.Upstreams([]string{up}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Backends {
		c.Backends[i].HealthInterval = 0
	}
	g, err := proxy.NewGearmanGatewayFromConfig(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, rec := recordedTracer(t, tracing.Gearman, cfg)
	srv, err := proxy.NewGearmanServer(proxy.GearmanConfig{
		Engine: gearman.Config{HandlePrefix: "H:jobgate"}, Gateway: g, Tracer: tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
	})
	return l.Addr().String(), rec
}

// TestGearmanGatewayTracePayload: with payload_traceparent on, the
// worker's JOB_ASSIGN carries the process span's context in front of the
// workload, and the upstream keeps the workload as submitted.
func TestGearmanGatewayTracePayload(t *testing.T) {
	up := testutil.StartGearmand(t)
	addr, rec := startTracedGateway(t, up, tracing.Config{PayloadTraceparent: true})
	cl := gmDial(t, addr)
	cl.send(codec.SubmitJobBg, "gwp", "", "body")
	h := cl.expect(codec.JobCreated)[0]
	w := gmDial(t, addr)
	w.send(codec.CanDo, "gwp")
	w.send(codec.GrabJob)
	a := w.expect(codec.JobAssign)
	ctx, body := jobctx.Extract(context.Background(), []byte(a[2]))
	if a[0] != h || string(body) != "body" || len(a[2]) != len("body")+jobctx.EnvelopeLen {
		t.Fatalf("JOB_ASSIGN %q", a)
	}
	w.send(codec.WorkComplete, h, "")
	spans := waitSpans(t, rec, 3)
	if sc := trace.SpanContextFromContext(ctx); sc.SpanID() != spans[2].SpanContext().SpanID() || spans[2].Name() != "process gwp" {
		t.Fatalf("envelope carries %v, process span %v", sc, spans[2].SpanContext())
	}
}
