package proxy_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/clock"
	"github.com/jobgate/jobgate/jobserver/gearman"
	"github.com/jobgate/jobgate/proxy"
	"github.com/jobgate/jobgate/tracing"
)

// expectEnded fails the test unless rec holds exactly n ended spans now:
// the fake clock fires timers inside Advance, so nothing is in flight.
func expectEnded(t *testing.T, rec *tracetest.SpanRecorder, n int, when string) {
	t.Helper()
	if got := rec.Ended(); len(got) != n {
		t.Fatalf("%s: %d spans ended, want %d:\n%s", when, len(got), n, strings.Join(describeSpans(got), "\n"))
	}
}

// TestBeanstalkGatewayTraceTTR: through a gateway to a real beanstalkd, a
// reserved job's process span ends as ttr_expired when its TTR (from the
// put, counted again from a touch) runs out on the gateway's clock, not at
// the next reservation; a job deleted or released in time stops its
// deadline. (Whether beanstalkd then requeues the job is its business:
// it was seen to hold an expired reservation for seconds, so the test
// does not wait for it.)
func TestBeanstalkGatewayTraceTTR(t *testing.T) {
	g, ups := bgwGateway(t, 1)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	tr, rec := recordedTracer(t, tracing.Beanstalk, tracing.Config{})
	addr, _ := bsServe(t, proxy.BeanstalkConfig{Gateway: g, Tracer: tr, Clock: clk})
	c := bgwDial(t, addr)
	tube := gobeanstalk.NewTube(c, "ttr")
	ts := gobeanstalk.NewTubeSet(c, "ttr")
	base := clk.Pending()

	// Deleted in time: completed, and no deadline left behind.
	id, err := tube.Put([]byte("a"), 1, 0, time.Minute)
	must(t, err)
	_, _, err = ts.Reserve(time.Second)
	must(t, err)
	if n := clk.Pending(); n != base+1 {
		t.Fatalf("%d timers pending after the reservation, want %d", n, base+1)
	}
	must(t, c.Delete(id))
	spans := waitSpans(t, rec, 3)
	if s := describeSpans(spans)[2]; !strings.Contains(s, "outcome=completed") {
		t.Fatalf("process span %s", s)
	}
	if n := clk.Pending(); n != base {
		t.Fatalf("%d timers pending after the delete, want %d", n, base)
	}
	rec.Reset()

	// Released in time: its deadline is stopped too.
	id, err = tube.Put([]byte("r"), 1, 0, time.Minute)
	must(t, err)
	_, _, err = ts.Reserve(time.Second)
	must(t, err)
	must(t, c.Release(id, 1, 0))
	_, _, err = ts.Reserve(time.Second)
	must(t, err)
	must(t, c.Delete(id))
	waitSpans(t, rec, 5)
	if n := clk.Pending(); n != base {
		t.Fatalf("%d timers pending after a release and a delete, want %d", n, base)
	}
	rec.Reset()

	// TTR 60s, touched once: the span ends 60s after the touch. The
	// worker's delete after that, which the upstream (its TTR on the real
	// clock) still takes, finds nothing to end.
	id, err = tube.Put([]byte("t"), 1, 0, time.Minute)
	must(t, err)
	_, _, err = ts.Reserve(time.Second)
	must(t, err)
	waitSpans(t, rec, 2) // send, receive
	clk.Advance(59 * time.Second)
	must(t, c.Touch(id))
	clk.Advance(59 * time.Second)
	expectEnded(t, rec, 2, "just before the TTR counted from the touch")
	clk.Advance(time.Second)
	expectEnded(t, rec, 3, "at the TTR")
	must(t, c.Delete(id))
	if s := describeSpans(waitSpans(t, rec, 3))[2]; !strings.Contains(s, "error.type=ttr_expired") || !strings.Contains(s, "events=touch;ttr_expired") {
		t.Fatalf("process span %s", s)
	}
	rec.Reset()

	// TTR 0, which beanstalkd raises to 1s: the span ends at 1s.
	id, err = tube.Put([]byte("b"), 1, 0, 0)
	must(t, err)
	_, _, err = ts.Reserve(time.Second)
	must(t, err)
	waitSpans(t, rec, 2) // send, receive
	clk.Advance(999 * time.Millisecond)
	expectEnded(t, rec, 2, "just before the TTR")
	clk.Advance(time.Millisecond)
	expectEnded(t, rec, 3, "at the TTR")

	want := []string{
		"T1 send ttr producer parent=- links=[] status=Unset messaging.destination.name=ttr messaging.message.body.size=1 messaging.message.id=ID messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk SERVER",
		"T1 receive ttr client parent=send ttr links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=ttr messaging.message.body.size=1 messaging.message.id=ID messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk SERVER wait",
		"T1 process ttr consumer parent=send ttr links=[] status=Error error.type=ttr_expired jobgate.job.attempt=1 jobgate.job.outcome=ttr_expired messaging.destination.name=ttr messaging.message.id=ID messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk SERVER wait events=ttr_expired",
	}
	checkSpans(t, waitSpans(t, rec, 3), fillSpans(want, ups[1], "ID", strconv.FormatUint(id, 10)))
	if n := clk.Pending(); n != base {
		t.Fatalf("%d timers pending at the end, want %d", n, base)
	}
}

// startClockedGateway serves a traced Gearman gateway to the gearmand at
// up whose timers run on clk.
func startClockedGateway(t *testing.T, up string, clk clock.Clock) (string, *tracetest.SpanRecorder) {
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
	tr, rec := recordedTracer(t, tracing.Gearman, tracing.Config{})
	addr, _, _ := gmServeStop(t, proxy.GearmanConfig{
		Engine: gearman.Config{HandlePrefix: "H:jobgate", Clock: clk}, Gateway: g, Tracer: tr,
	})
	return addr, rec
}

// TestGearmanGatewayTraceCanDoTimeout: through a gateway to a real
// gearmand, a job whose worker registered CAN_DO_TIMEOUT ends its process
// span with error.type timeout when the timeout runs out on the gateway's
// clock, as the local engine does; the late WORK_COMPLETE of that worker,
// which gearmand refuses, does not end the next worker's span.
func TestGearmanGatewayTraceCanDoTimeout(t *testing.T) {
	up := testutil.StartGearmand(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	addr, rec := startClockedGateway(t, up, clk)
	cl := gmDial(t, addr)
	cl.send(codec.SubmitJobBg, "slow", "", "data")
	h := cl.expect(codec.JobCreated)[0]
	w1 := gmDial(t, addr)
	w1.send(codec.CanDoTimeout, "slow", "1500")
	w1.send(codec.GrabJob)
	if a := w1.expect(codec.JobAssign); a[0] != h {
		t.Fatalf("assigned %q, want %s", a, h)
	}
	waitSpans(t, rec, 2) // send, receive
	clk.Advance(1499 * time.Millisecond)
	expectEnded(t, rec, 2, "just before the timeout")
	clk.Advance(time.Millisecond)
	expectEnded(t, rec, 3, "at the timeout")

	// gearmand requeues the job on its own clock.
	w2 := gmDial(t, addr)
	w2.send(codec.CanDo, "slow")
	for deadline := time.Now().Add(10 * time.Second); ; {
		w2.send(codec.GrabJob)
		w2.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		f, err := w2.rd.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Packet.Type == codec.JobAssign {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not come back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	w1.send(codec.WorkComplete, h, "late")
	if e := w1.expect(codec.Error); e[0] != "JOB_NOT_FOUND" {
		t.Fatalf("late WORK_COMPLETE: ERROR %q", e)
	}
	expectEnded(t, rec, 4, "after the late WORK_COMPLETE") // the second receive
	w2.send(codec.WorkComplete, h, "ok")
	w2.sync()

	want := []string{
		"T1 send slow producer parent=- links=[] status=Unset messaging.destination.name=slow messaging.message.body.size=4 messaging.message.id=HANDLE messaging.operation.name=SUBMIT_JOB_BG messaging.operation.type=send messaging.system=gearman SERVER",
		"T1 receive slow client parent=send slow links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=slow messaging.message.body.size=4 messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN messaging.operation.type=receive messaging.system=gearman SERVER wait",
		"T1 process slow consumer parent=send slow links=[] status=Error error.type=timeout jobgate.job.attempt=1 jobgate.job.outcome=failed messaging.destination.name=slow messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN messaging.operation.type=process messaging.system=gearman SERVER wait",
		"T1 receive slow client parent=send slow links=[=] status=Unset jobgate.job.attempt=2 messaging.destination.name=slow messaging.message.body.size=4 messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN messaging.operation.type=receive messaging.system=gearman SERVER wait",
		"T1 process slow consumer parent=send slow links=[] status=Unset jobgate.job.attempt=2 jobgate.job.outcome=completed messaging.destination.name=slow messaging.message.id=HANDLE messaging.operation.name=JOB_ASSIGN messaging.operation.type=process messaging.system=gearman SERVER wait events=retry{jobgate.job.attempt=2}",
	}
	checkSpans(t, waitSpans(t, rec, 5), fillSpans(want, up, "HANDLE", h))
}

// TestGearmanGatewayTraceCanDoTimeoutStopped: a job its worker completes
// within its CAN_DO_TIMEOUT ends completed, and its deadline is stopped.
func TestGearmanGatewayTraceCanDoTimeoutStopped(t *testing.T) {
	up := testutil.StartGearmand(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	addr, rec := startClockedGateway(t, up, clk)
	base := clk.Pending()
	cl := gmDial(t, addr)
	cl.send(codec.SubmitJob, "quick", "", "x")
	h := cl.expect(codec.JobCreated)[0]
	w := gmDial(t, addr)
	w.send(codec.CanDoTimeout, "quick", "60000")
	w.send(codec.GrabJob)
	w.expect(codec.JobAssign)
	waitSpans(t, rec, 2)
	if n := clk.Pending(); n != base+1 {
		t.Fatalf("%d timers pending after the assignment, want %d", n, base+1)
	}
	w.send(codec.WorkComplete, h, "done")
	cl.expect(codec.WorkComplete)
	spans := waitSpans(t, rec, 3)
	if s := describeSpans(spans)[2]; !strings.Contains(s, "outcome=completed") {
		t.Fatalf("process span %s", s)
	}
	if n := clk.Pending(); n != base {
		t.Fatalf("%d timers pending after WORK_COMPLETE, want %d", n, base)
	}
	clk.Advance(time.Minute)
	expectEnded(t, rec, 3, "a minute later")
}

// fillSpans fills the placeholders of want in place and returns it: SERVER
// becomes upstream's server.address and server.port attributes, and each
// further old, new pair is replaced too.
func fillSpans(want []string, upstream string, pairs ...string) []string {
	host, port, _ := net.SplitHostPort(upstream)
	rep := strings.NewReplacer(append([]string{"SERVER", "server.address=" + host + " server.port=" + port}, pairs...)...)
	for i := range want {
		want[i] = rep.Replace(want[i])
	}
	return want
}
