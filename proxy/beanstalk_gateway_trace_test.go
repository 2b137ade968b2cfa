package proxy_test

import (
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/tracing"
)

// startTracedBeanstalkGateway serves a Beanstalk gateway over one real
// beanstalkd, traced into the returned recorder.
func startTracedBeanstalkGateway(t *testing.T, cfg tracing.Config) (gw, up string, srv *proxy.BeanstalkServer, rec *tracetest.SpanRecorder) {
	t.Helper()
	g, ups := bgwGateway(t, 1)
	tr, rec := recordedTracer(t, tracing.Beanstalk, cfg)
	gw, srv = bsServe(t, proxy.BeanstalkConfig{Gateway: g, Tracer: tr})
	return gw, ups[1], srv, rec
}

// TestBeanstalkGatewayTrace traces jobs through a gateway to a real
// beanstalkd: put, reserve, release and retry, touch and delete give the
// same spans as on the engine, with the upstream's address and the
// client-visible id; a bury, a worker that disconnects holding a job, and
// puts the gateway refuses end their spans with the reason.
func TestBeanstalkGatewayTrace(t *testing.T) {
	addr, up, srv, rec := startTracedBeanstalkGateway(t, tracing.Config{})
	prod := bgwDial(t, addr)
	work := bgwDial(t, addr)
	id, tube, ts := bsReleaseRetry(t, prod, work)
	want := []string{
		"T1 send emails producer parent=- links=[] status=Unset messaging.destination.name=emails messaging.message.body.size=5 messaging.message.id=ID messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk SERVER",
		"T1 receive emails client parent=send emails links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=emails messaging.message.body.size=5 messaging.message.id=ID messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk SERVER wait",
		"T1 process emails consumer parent=send emails links=[] status=Unset jobgate.job.attempt=1 jobgate.job.outcome=released messaging.destination.name=emails messaging.message.id=ID messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk SERVER wait events=release{jobgate.job.delay_ms=0,jobgate.job.priority=7}",
		"T1 receive emails client parent=send emails links=[=] status=Unset jobgate.job.attempt=2 messaging.destination.name=emails messaging.message.body.size=5 messaging.message.id=ID messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk SERVER wait",
		"T1 process emails consumer parent=send emails links=[] status=Unset jobgate.job.attempt=2 jobgate.job.outcome=completed messaging.destination.name=emails messaging.message.id=ID messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk SERVER wait events=retry{jobgate.job.attempt=2};touch",
	}
	checkSpans(t, waitSpans(t, rec, 5), fillSpans(want, up, "ID", strconv.FormatUint(id, 10)))
	rec.Reset()

	// A bury, then a worker that goes away holding the kicked job.
	id2, err := tube.Put([]byte("x"), 1, 0, time.Minute)
	must(t, err)
	_, _, err = ts.Reserve(time.Second)
	must(t, err)
	must(t, work.Bury(id2, 4))
	must(t, work.KickJob(id2))
	w2 := bsDial(t, addr)
	bsRoundTrip(t, w2, "watch emails\r\n", "WATCHING 2\r\n", "reserve\r\n", "RESERVED "+strconv.FormatUint(id2, 10)+" 1\r\nx\r\n")
	w2.nc.Close()
	want = []string{
		"T1 send emails producer parent=- links=[] status=Unset messaging.destination.name=emails messaging.message.body.size=1 messaging.message.id=ID messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk SERVER",
		"T1 receive emails client parent=send emails links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=emails messaging.message.body.size=1 messaging.message.id=ID messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk SERVER wait",
		"T1 process emails consumer parent=send emails links=[] status=Error error.type=bury jobgate.job.attempt=1 jobgate.job.outcome=buried messaging.destination.name=emails messaging.message.id=ID messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk SERVER wait events=bury{jobgate.job.priority=4}",
		"T1 receive emails client parent=send emails links=[=] status=Unset jobgate.job.attempt=2 messaging.destination.name=emails messaging.message.body.size=1 messaging.message.id=ID messaging.operation.name=reserve messaging.operation.type=receive messaging.system=beanstalk SERVER wait",
		"T1 process emails consumer parent=send emails links=[] status=Error error.type=worker_lost jobgate.job.attempt=2 jobgate.job.outcome=failed messaging.destination.name=emails messaging.message.id=ID messaging.operation.name=reserve messaging.operation.type=process messaging.system=beanstalk SERVER wait events=retry{jobgate.job.attempt=2}",
	}
	checkSpans(t, waitSpans(t, rec, 5), fillSpans(want, up, "ID", strconv.FormatUint(id2, 10)))
	rec.Reset()

	// Puts the gateway refuses itself.
	raw := bsDial(t, addr)
	defer raw.nc.Close()
	late := bsDial(t, addr)
	defer late.nc.Close()
	bsRoundTrip(t, raw, "use emails\r\n", "USING emails\r\n", "put 0 0 60 1\r\nxy\r\n", "EXPECTED_CRLF\r\n")
	srv.Drain()
	bsRoundTrip(t, late, "use emails\r\n", "USING emails\r\n", "put 0 0 60 1\r\nz\r\n", "DRAINING\r\n")
	checkSpans(t, waitSpans(t, rec, 2), []string{
		"T1 send emails producer parent=- links=[] status=Error error.type=EXPECTED_CRLF messaging.destination.name=emails messaging.message.body.size=0 messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk",
		"T2 send emails producer parent=- links=[] status=Error error.type=DRAINING messaging.destination.name=emails messaging.message.body.size=1 messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk",
	})
	if n := srv.TraceEvicted(); n != 0 {
		t.Errorf("evicted %d", n)
	}
}

// TestBeanstalkGatewayTraceTableSize: past TraceTableSize jobs the gateway
// forgets the oldest job's trace state, and counts it.
func TestBeanstalkGatewayTraceTableSize(t *testing.T) {
	g, _ := bgwGateway(t, 1)
	tr, _ := recordedTracer(t, tracing.Beanstalk, tracing.Config{})
	addr, srv := bsServe(t, proxy.BeanstalkConfig{Gateway: g, Tracer: tr, TraceTableSize: 2})
	c := bgwDial(t, addr)
	for i := range 3 {
		if _, err := c.Put([]byte("x"), 1, 0, time.Minute); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if n := srv.TraceEvicted(); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
}

// TestBeanstalkGatewayTraceReserveStart: a reserve's receive span starts
// when the reserve was read, not at the command before it (the event loop
// forwards a reserve without the goroutine code that stamps commands).
func TestBeanstalkGatewayTraceReserveStart(t *testing.T) {
	addr, _, _, rec := startTracedBeanstalkGateway(t, tracing.Config{})
	w := bsDial(t, addr)
	defer w.nc.Close()
	p := bsDial(t, addr)
	defer p.nc.Close()
	bsRoundTrip(t, w, "reserve-with-timeout 0\r\n", "TIMED_OUT\r\n") // opens the session
	bsRoundTrip(t, p, "put 0 0 60 1\r\na\r\n", "INSERTED "+gid(1)+"\r\n")
	sent := time.Now()
	bsRoundTrip(t, w, "reserve\r\n", "RESERVED "+gid(1)+" 1\r\na\r\n")
	found := false
	for _, s := range waitSpans(t, rec, 2) { // send and receive
		if s.Name() == "receive default" {
			found = true
			if s.StartTime().Before(sent) {
				t.Fatalf("the receive span starts %v before the reserve was sent", sent.Sub(s.StartTime()))
			}
		}
	}
	if !found {
		t.Fatal("no receive span")
	}
}
