package proxy_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	engine "github.com/jobgate/jobgate/jobserver/beanstalk"
	"github.com/jobgate/jobgate/tracing"
)

// TestBeanstalkTraceWaitingReserve traces jobs whose reserve waited: the
// worker reserves first and the traced put, on another connection, hands
// it the job, so the reservation's trace is noted by the producer's
// command and read by the worker's (Session.ReservedTrace). The receive
// and process spans must carry the job's attributes, as for a reserve
// answered at once. Clients: go-beanstalk.
func TestBeanstalkTraceWaitingReserve(t *testing.T) {
	bsBothPaths(t, testBeanstalkTraceWaitingReserve)
}

func testBeanstalkTraceWaitingReserve(t *testing.T) {
	tr, rec := recordedTracer(t, tracing.Beanstalk, tracing.Config{})
	addr, _ := startBeanstalkTraced(t, tr, engine.Config{})
	prod := bgwDial(t, addr)
	work := bgwDial(t, addr)
	ts := gobeanstalk.NewTubeSet(work, "jobs")
	tube := gobeanstalk.NewTube(prod, "jobs")
	for _, body := range []string{"first", "second job"} {
		type reserved struct {
			id   uint64
			body []byte
			err  error
		}
		got := make(chan reserved, 1)
		go func() {
			id, body, err := ts.Reserve(5 * time.Second)
			got <- reserved{id, body, err}
		}()
		waitWaiting(t, prod, 1)
		id, err := tube.Put([]byte(body), 1, 0, time.Minute)
		must(t, err)
		r := <-got
		must(t, r.err)
		if r.id != id || string(r.body) != body {
			t.Fatalf("reserved %d %q, want %d %q", r.id, r.body, id, body)
		}
		must(t, work.Delete(id))
		spans := waitSpans(t, rec, 3)
		size := len(body)
		checkSpans(t, spans, []string{
			fmt.Sprintf("T1 send jobs producer parent=- links=[] status=Unset messaging.destination.name=jobs messaging.message.body.size=%d messaging.message.id=%d messaging.operation.name=put messaging.operation.type=send messaging.system=beanstalk", size, id),
			fmt.Sprintf("T1 receive jobs client parent=send jobs links=[=] status=Unset jobgate.job.attempt=1 messaging.destination.name=jobs messaging.message.body.size=%d messaging.message.id=%d messaging.operation.name=reserve-with-timeout messaging.operation.type=receive messaging.system=beanstalk wait", size, id),
			fmt.Sprintf("T1 process jobs consumer parent=send jobs links=[] status=Unset jobgate.job.attempt=1 jobgate.job.outcome=completed messaging.destination.name=jobs messaging.message.id=%d messaging.operation.name=reserve-with-timeout messaging.operation.type=process messaging.system=beanstalk wait", id),
		})
		rec.Reset()
	}
}

// waitWaiting polls the server's stats until current-waiting is n.
func waitWaiting(t *testing.T, c *gobeanstalk.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c.Stats()
		must(t, err)
		if st["current-waiting"] == strconv.Itoa(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("current-waiting %s after 5s, want %d", st["current-waiting"], n)
		}
		time.Sleep(time.Millisecond)
	}
}
