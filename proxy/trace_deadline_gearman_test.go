package proxy_test

import (
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/clock"
)

// TestGearmanGatewayTraceCanDoTimeoutFloor: gearmand raises a
// CAN_DO_TIMEOUT under a second to a second, so through a gateway to a
// real gearmand a worker that asked for 30 ms and completes after 30 ms
// (on the gateway's clock) still completes its job, and the process span
// says so; a job it does not complete ends as a timeout after a second,
// not after 30 ms.
func TestGearmanGatewayTraceCanDoTimeoutFloor(t *testing.T) {
	up := testutil.StartGearmand(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	addr, rec := startClockedGateway(t, up, clk)
	base := clk.Pending()
	cl := gmDial(t, addr)
	w := gmDial(t, addr)
	w.send(codec.CanDoTimeout, "brief", "30")

	// Completed after the 30 ms asked for: gearmand accepts it (the real
	// time since the assignment is well under its second).
	cl.send(codec.SubmitJob, "brief", "", "x")
	h := cl.expect(codec.JobCreated)[0]
	w.send(codec.GrabJob)
	w.expect(codec.JobAssign)
	waitSpans(t, rec, 2)
	clk.Advance(30 * time.Millisecond)
	expectEnded(t, rec, 2, "30 ms after the assignment")
	w.send(codec.WorkComplete, h, "done")
	if got := cl.expect(codec.WorkComplete); got[0] != h {
		t.Fatalf("WORK_COMPLETE %q", got)
	}
	spans := waitSpans(t, rec, 3)
	if s := describeSpans(spans)[2]; !strings.Contains(s, "outcome=completed") {
		t.Fatalf("process span %s", s)
	}
	if n := clk.Pending(); n != base {
		t.Fatalf("%d timers pending after WORK_COMPLETE, want %d", n, base)
	}
	rec.Reset()

	// Not completed: the span ends as a timeout after the second.
	cl.send(codec.SubmitJobBg, "brief", "", "y")
	cl.expect(codec.JobCreated)
	w.send(codec.GrabJob)
	w.expect(codec.JobAssign)
	waitSpans(t, rec, 2)
	clk.Advance(999 * time.Millisecond)
	expectEnded(t, rec, 2, "just before the second")
	clk.Advance(time.Millisecond)
	expectEnded(t, rec, 3, "at the second")
	if s := describeSpans(rec.Ended())[2]; !strings.Contains(s, "error.type=timeout") {
		t.Fatalf("process span %s", s)
	}
}

// TestGearmanGatewayTraceCoalescedSubmit: through a gateway to a real
// gearmand, a second SUBMIT_JOB with the unique of a job a worker holds
// gets that job's handle; the process span stays open and the worker's
// WORK_COMPLETE ends it completed, stopping its deadline.
func TestGearmanGatewayTraceCoalescedSubmit(t *testing.T) {
	up := testutil.StartGearmand(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	addr, rec := startClockedGateway(t, up, clk)
	base := clk.Pending()
	c1, c2, w := gmDial(t, addr), gmDial(t, addr), gmDial(t, addr)
	c1.send(codec.SubmitJob, "co", "u1", "x")
	h := c1.expect(codec.JobCreated)[0]
	w.send(codec.CanDoTimeout, "co", "60000")
	w.send(codec.GrabJob)
	w.expect(codec.JobAssign)
	waitSpans(t, rec, 2) // send, receive
	c2.send(codec.SubmitJob, "co", "u1", "x")
	if h2 := c2.expect(codec.JobCreated)[0]; h2 != h {
		t.Fatalf("coalesced submit got %s, want %s", h2, h)
	}
	waitSpans(t, rec, 3) // the second send
	w.send(codec.WorkComplete, h, "done")
	c1.expect(codec.WorkComplete)
	c2.expect(codec.WorkComplete)
	spans := waitSpans(t, rec, 4)
	if s := describeSpans(spans)[3]; !strings.Contains(s, "process co") || !strings.Contains(s, "outcome=completed") {
		t.Fatalf("process span %s", s)
	}
	if n := clk.Pending(); n != base {
		t.Fatalf("%d timers pending after WORK_COMPLETE, want %d", n, base)
	}
}
