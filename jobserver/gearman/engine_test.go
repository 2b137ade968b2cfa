package gearman

import (
	"strconv"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

func TestForegroundRoundTrip(t *testing.T) {
	h := newHarness(t, Config{})
	w := h.open()
	w.send(codec.CanDo, "rev")
	w.send(codec.GrabJob)
	w.expect("NO_JOB")
	w.send(codec.PreSleep)
	w.expect()
	c := h.open()
	hd := c.submit(codec.SubmitJob, "rev", "", "test")
	if hd != "H:t:1" {
		t.Fatalf("handle %q", hd)
	}
	w.expect("NOOP")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN H:t:1 rev test")
	w.send(codec.WorkComplete, hd, "tset")
	w.expect()
	c.expect("WORK_COMPLETE H:t:1 tset")
	if st := h.e.Stats(); st.Jobs != 0 || st.Running != 0 {
		t.Fatalf("stats after completion: %+v", st)
	}
}

func TestEcho(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	c.send(codec.EchoReq, "hello")
	c.expect("ECHO_RES hello")
	c.send(codec.EchoReq)
	c.expect("ECHO_RES ")
}

func TestPriorityAcrossFunctions(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	c.submit(codec.SubmitJobLowBg, "a", "", "low-a")
	c.submit(codec.SubmitJobBg, "b", "", "norm-b")
	c.submit(codec.SubmitJobHighBg, "a", "", "high-a")
	c.submit(codec.SubmitJobHighBg, "b", "", "high-b")
	c.submit(codec.SubmitJobBg, "a", "", "norm-a")
	c.submit(codec.SubmitJobLow, "b", "", "low-b")
	w := h.open()
	w.send(codec.CanDo, "b")
	w.send(codec.CanDo, "a")
	var order []string
	for i := 0; i < 6; i++ {
		w.send(codec.GrabJob)
		got := w.rec.take()
		f := strings.Fields(got[0])
		order = append(order, f[len(f)-1])
	}
	want := "high-a high-b norm-b norm-a low-a low-b"
	if strings.Join(order, " ") != want {
		t.Fatalf("order %v, want %s", order, want)
	}
	w.send(codec.GrabJob)
	w.expect("NO_JOB")
}

func TestCoalescing(t *testing.T) {
	h := newHarness(t, Config{})
	c1, c2, c3, bgc := h.open(), h.open(), h.open(), h.open()
	hd := c1.submit(codec.SubmitJob, "f", "u1", "abc")
	if got := c2.submit(codec.SubmitJob, "f", "u1", "other"); got != hd {
		t.Fatalf("duplicate got %s, want %s", got, hd)
	}
	if got := bgc.submit(codec.SubmitJobBg, "f", "u1", "x"); got != hd {
		t.Fatalf("background duplicate got %s", got)
	}
	// Same unique, other function: a new job.
	if got := c1.submit(codec.SubmitJob, "g", "u1", "abc"); got == hd {
		t.Fatal("unique coalesced across functions")
	}
	// Empty unique never coalesces.
	a := c1.submit(codec.SubmitJobBg, "f", "", "same")
	b := c1.submit(codec.SubmitJobBg, "f", "", "same")
	if a == b {
		t.Fatal("empty unique coalesced")
	}
	// "-" makes the workload the key.
	d1 := c1.submit(codec.SubmitJobBg, "f", "-", "payload")
	d2 := c1.submit(codec.SubmitJobBg, "f", "-", "payload")
	d3 := c1.submit(codec.SubmitJobBg, "f", "-", "other")
	if d1 != d2 || d1 == d3 {
		t.Fatalf("unique '-': %s %s %s", d1, d2, d3)
	}

	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJobUniq)
	w.expect("JOB_ASSIGN_UNIQ " + hd + " f u1 abc")
	// A client attaches while the job runs.
	if got := c3.submit(codec.SubmitJob, "f", "u1", "late"); got != hd {
		t.Fatalf("attach while running got %s", got)
	}
	w.send(codec.WorkStatus, hd, "1", "2")
	w.send(codec.WorkData, hd, "d")
	w.send(codec.WorkWarning, hd, "w")
	w.send(codec.WorkComplete, hd, "done")
	for _, c := range []*conn{c1, c2, c3} {
		c.expect("WORK_STATUS "+hd+" 1 2", "WORK_DATA "+hd+" d", "WORK_WARNING "+hd+" w", "WORK_COMPLETE "+hd+" done")
	}
	bgc.expect()
	// After completion the unique is free again.
	if got := c1.submit(codec.SubmitJob, "f", "u1", "again"); got == hd {
		t.Fatal("finished job still coalesces")
	}
}

func TestDropAbandonedForegroundJob(t *testing.T) {
	h := newHarness(t, Config{})
	adm := h.open()
	c1, c2 := h.open(), h.open()
	c1.submit(codec.SubmitJob, "f", "u", "x")
	c2.submit(codec.SubmitJob, "f", "u", "x")
	c1.close()
	if got := adm.admin("status"); got != "f\t1\t0\t0\n.\n" {
		t.Fatalf("one client left: status %q", got)
	}
	c2.close()
	if got := adm.admin("status"); got != "f\t0\t0\t0\n.\n" {
		t.Fatalf("all clients left: status %q", got)
	}
	// A new submit with the same unique makes a new job and gets results.
	c3 := h.open()
	hd := c3.submit(codec.SubmitJob, "f", "u", "y")
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + hd + " f y")
	// A running job whose clients all leave runs to its end...
	c3.close()
	w.send(codec.WorkData, hd, "ignored")
	w.expect()
	// ...but is not run again if its worker gives it back.
	w.close()
	if got := adm.admin("status"); got != "f\t0\t0\t0\n.\n" {
		t.Fatalf("abandoned running job requeued: status %q", got)
	}
	// Background jobs stay when their submitter leaves.
	c4 := h.open()
	c4.submit(codec.SubmitJobBg, "f", "", "x")
	c4.close()
	if got := adm.admin("status"); got != "f\t1\t0\t0\n.\n" {
		t.Fatalf("background job dropped: status %q", got)
	}
}

func TestWorkerDisconnectRequeuesAndRetryLimit(t *testing.T) {
	h := newHarness(t, Config{JobRetries: 2})
	c := h.open()
	hd := c.submit(codec.SubmitJob, "f", "", "x")
	w1 := h.open()
	w1.send(codec.CanDo, "f")
	w1.send(codec.GrabJob)
	w1.expect("JOB_ASSIGN " + hd + " f x")
	w1.close()
	c.expect() // requeued, retries=1
	adm := h.open()
	if got := adm.admin("show jobs"); got != hd+"\t1\t0\t0\n.\n" {
		t.Fatalf("show jobs %q", got)
	}
	w2 := h.open()
	w2.send(codec.CanDo, "f")
	w2.send(codec.GrabJob)
	w2.expect("JOB_ASSIGN " + hd + " f x")
	w2.send(codec.CantDo, "f") // gives it back: second failure
	c.expect("WORK_FAIL " + hd)
	if got := adm.admin("status"); got != "f\t0\t0\t0\n.\n" {
		t.Fatalf("status %q", got)
	}
}

func TestCanDoTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	hd := c.submit(codec.SubmitJob, "f", "", "x")
	w := h.open()
	w.send(codec.CanDoTimeout, "f", "1500")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + hd + " f x")
	other := h.open()
	other.send(codec.CanDo, "f")
	other.send(codec.PreSleep)
	h.clk.Advance(1499 * time.Millisecond)
	other.expect()
	h.clk.Advance(time.Millisecond)
	other.expect("NOOP") // requeued and a sleeper woken
	w.send(codec.WorkComplete, hd, "late")
	w.expect("ERROR JOB_NOT_FOUND Job given in work result not found")
	other.send(codec.GrabJob)
	other.expect("JOB_ASSIGN " + hd + " f x")
	other.send(codec.WorkComplete, hd, "ok")
	c.expect("WORK_COMPLETE " + hd + " ok")
	if n := h.clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending", n)
	}
	// A job completed in time leaves no timeout behind.
	hd2 := c.submit(codec.SubmitJob, "f", "", "y")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + hd2 + " f y")
	w.send(codec.WorkComplete, hd2, "done")
	c.expect("WORK_COMPLETE " + hd2 + " done")
	h.clk.Advance(time.Second)
	other.expect()
}

func TestEpochJob(t *testing.T) {
	h := newHarness(t, Config{})
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.PreSleep)
	c := h.open()
	at := epoch0.Add(10 * time.Second).Unix()
	hd := c.submit(codec.SubmitJobEpoch, "f", "", strconv.FormatInt(at, 10), "later")
	w.expect()
	adm := h.open()
	if got := adm.admin("prioritystatus"); got != "f\t0\t1\t0\t1\n.\n" {
		t.Fatalf("prioritystatus %q", got)
	}
	w.send(codec.GrabJob)
	w.expect("NO_JOB")
	w.send(codec.PreSleep)
	w.expect()
	h.clk.Advance(9 * time.Second)
	w.expect()
	h.clk.Advance(time.Second)
	w.expect("NOOP")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + hd + " f later")
	// An epoch in the past, or garbage, runs at once.
	c.submit(codec.SubmitJobEpoch, "f", "", "12", "past")
	c.submit(codec.SubmitJobEpoch, "f", "", "abc", "garbage")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN H:t:2 f past")
}

func TestSchedJob(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.PreSleep)
	// epoch0 is Monday 10:00:30 UTC; schedule at 10:02 any day.
	hd := c.submit(codec.SubmitJobSched, "f", "", "2", "10", "", "", "", "cron")
	h.clk.Advance(89 * time.Second)
	w.expect()
	h.clk.Advance(time.Second)
	w.expect("NOOP")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + hd + " f cron")
	// Day of week 0 is Monday: the current minute matches, so it runs now.
	c.submit(codec.SubmitJobSched, "f", "", "*", "*", "*", "*", "0", "now")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN H:t:2 f now")
	c.send(codec.SubmitJobSched, "f", "", "60", "", "", "", "", "bad")
	c.expect("ERROR INVALID_ARGUMENT Invalid schedule")
}

func TestWakeupsOnlyAsNeeded(t *testing.T) {
	h := newHarness(t, Config{})
	var ws []*conn
	for i := 0; i < 4; i++ {
		w := h.open()
		w.send(codec.CanDo, "f")
		w.send(codec.PreSleep)
		ws = append(ws, w)
	}
	noops := func() int {
		n := 0
		for _, w := range ws {
			for _, g := range w.rec.take() {
				if g == "NOOP" {
					n++
				}
			}
		}
		return n
	}
	c := h.open()
	c.submit(codec.SubmitJobBg, "f", "", "1")
	if n := noops(); n != 1 {
		t.Fatalf("one job woke %d workers", n)
	}
	c.submit(codec.SubmitJobBg, "f", "", "2")
	c.submit(codec.SubmitJobBg, "f", "", "3")
	if n := noops(); n != 2 {
		t.Fatalf("two more jobs woke %d workers", n)
	}
	c.submit(codec.SubmitJobBg, "f", "", "4")
	c.submit(codec.SubmitJobBg, "f", "", "5")
	if n := noops(); n != 1 {
		t.Fatalf("with one sleeper left, two jobs woke %d", n)
	}
	// PRE_SLEEP with a job waiting gets NOOP at once.
	ws[0].send(codec.PreSleep)
	ws[0].expect("NOOP")
}

func TestWokenWorkerLeavingWakesAnother(t *testing.T) {
	h := newHarness(t, Config{})
	a, b := h.open(), h.open()
	for _, w := range []*conn{a, b} {
		w.send(codec.CanDo, "f")
		w.send(codec.PreSleep)
	}
	c := h.open()
	c.submit(codec.SubmitJobBg, "f", "", "x")
	a.expect("NOOP")
	b.expect()
	a.close() // woken, never grabbed
	b.expect("NOOP")
}

func TestExceptionsOption(t *testing.T) {
	h := newHarness(t, Config{})
	plain, opted := h.open(), h.open()
	opted.send(codec.OptionReq, "Exceptions")
	opted.expect("OPTION_RES Exceptions")
	plain.send(codec.OptionReq, "bogus")
	plain.expect("ERROR UNKNOWN_OPTION Server does not recognize given option")
	hd := plain.submit(codec.SubmitJob, "f", "u", "x")
	opted.submit(codec.SubmitJob, "f", "u", "x")
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.rec.take()
	w.send(codec.WorkException, hd, "boom")
	opted.expect("WORK_EXCEPTION " + hd + " boom")
	// The handle alone: not gearmand's "handle\0".
	got := plain.rec.take()
	if len(got) != 1 || got[0] != "WORK_FAIL "+hd {
		t.Fatalf("plain client got %q", got)
	}
	// gearmand --exceptions turns it on for everyone.
	h2 := newHarness(t, Config{Exceptions: true})
	c := h2.open()
	hd = c.submit(codec.SubmitJob, "f", "", "x")
	w = h2.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.rec.take()
	w.send(codec.WorkException, hd, "boom")
	c.expect("WORK_EXCEPTION " + hd + " boom")
}

func TestStatus(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	c.send(codec.GetStatus, "H:t:99")
	c.expect("STATUS_RES H:t:99 0 0 0 0")
	c.send(codec.GetStatus, "nonsense")
	c.expect("STATUS_RES nonsense 0 0 0 0")
	c.send(codec.GetStatusUnique, "u")
	c.expect("STATUS_RES_UNIQUE u 0 0 0 0 0")
	hd := c.submit(codec.SubmitJob, "f", "u", "x")
	c.send(codec.GetStatus, hd)
	c.expect("STATUS_RES " + hd + " 1 0 0 0")
	w := h.open()
	w.send(codec.CanDo, "f")
	w.send(codec.GrabJob)
	w.rec.take()
	w.send(codec.WorkStatus, hd, "3", "10")
	c.expect("WORK_STATUS " + hd + " 3 10")
	c.send(codec.GetStatus, hd)
	c.expect("STATUS_RES " + hd + " 1 1 3 10")
	c.send(codec.GetStatusUnique, "u")
	c.expect("STATUS_RES_UNIQUE u 1 1 3 10 1")
	w.send(codec.WorkFail, hd)
	c.expect("WORK_FAIL " + hd)
	c.send(codec.GetStatus, hd)
	c.expect("STATUS_RES " + hd + " 0 0 0 0")
}

func TestMaxQueue(t *testing.T) {
	h := newHarness(t, Config{})
	adm, c := h.open(), h.open()
	if got := adm.admin("maxqueue f 2"); got != "OK\r\n" {
		t.Fatalf("maxqueue: %q", got)
	}
	c.submit(codec.SubmitJobBg, "f", "", "1")
	c.submit(codec.SubmitJobBg, "f", "a", "2")
	c.send(codec.SubmitJobBg, "f", "", "3")
	c.expect("ERROR QUEUE_ERROR Job queue is full")
	// A duplicate still coalesces when the queue is full.
	if got := c.submit(codec.SubmitJobBg, "f", "a", "x"); got != "H:t:2" {
		t.Fatalf("duplicate at limit: %s", got)
	}
	adm.admin("maxqueue f 5 2 1")
	c.send(codec.SubmitJobLowBg, "f", "", "low")
	c.expect("ERROR QUEUE_ERROR Job queue is full")
	c.submit(codec.SubmitJobHighBg, "f", "", "high")
	adm.admin("maxqueue f")
	c.submit(codec.SubmitJobLowBg, "f", "", "unlimited")
	if got := adm.admin("maxqueue"); got != "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+maxqueue\r\n" {
		t.Fatalf("maxqueue alone: %q", got)
	}
}

func TestErrors(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	p := codec.Packet{Magic: codec.Res, Type: codec.EchoReq, Args: [][]byte{[]byte("x")}}
	if err := c.s.Handle(&p); err != nil {
		t.Fatal(err)
	}
	c.expect("ERROR INVALID_MAGIC Request magic expected")
	for _, typ := range []codec.Type{codec.AllYours, codec.Noop, codec.JobCreated, codec.EchoRes, codec.StatusRes, codec.JobAssignAll} {
		c.send(typ)
		c.expect("ERROR INVALID_COMMAND Command not expected")
	}
	c.send(codec.WorkComplete, "H:t:1", "x")
	c.expect("ERROR JOB_NOT_FOUND Job given in work result not found")
	c.send(codec.WorkData, "H:t:1", "x")
	c.expect("ERROR JOB_NOT_FOUND Job does not exist on server")
	c.send(codec.WorkException, "H:t:1", "x")
	c.expect("ERROR JOB_NOT_FOUND An exception was received for a job that does not exist")
	c.send(codec.SubmitJob, "f", strings.Repeat("u", 65), "x")
	c.expect("ERROR ARGUMENT_TOO_LARGE Unique value too large")
	// Another worker's job is not ours.
	hd := c.submit(codec.SubmitJob, "f", "", "x")
	w1, w2 := h.open(), h.open()
	w1.send(codec.CanDo, "f")
	w1.send(codec.GrabJob)
	w1.rec.take()
	w2.send(codec.WorkStatus, hd, "1", "2")
	w2.expect("ERROR JOB_NOT_FOUND Job given in work result not found")
	// Too few arguments closes the connection.
	bad := codec.Packet{Magic: codec.Req, Type: codec.SubmitJob, Args: [][]byte{[]byte("f")}}
	if err := c.s.Handle(&bad); err == nil {
		t.Fatal("short packet accepted")
	}
}

func TestReduceJobs(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	hd := c.submit(codec.SubmitReduceJob, "map", "u", "reduce", "agg", "data")
	bg := c.submit(codec.SubmitReduceJobBackground, "map", "", "reduce", "agg", "data2")
	plain := c.submit(codec.SubmitJobBg, "map", "p", "data3")
	w := h.open()
	w.send(codec.CanDo, "map")
	w.send(codec.GrabJobAll)
	w.expect("JOB_ASSIGN_ALL " + hd + " map u reduce data")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + bg + " map data2")
	w.send(codec.GrabJobAll)
	w.expect("JOB_ASSIGN_UNIQ " + plain + " map p data3")
	w.send(codec.WorkComplete, hd, "r")
	c.expect("WORK_COMPLETE " + hd + " r")
	// An empty reducer makes a plain job, as in gearmand.
	empty := c.submit(codec.SubmitReduceJobBackground, "map", "e", "", "agg", "data4")
	w.send(codec.GrabJobAll)
	w.expect("JOB_ASSIGN_UNIQ " + empty + " map e data4")
}

func TestSetClientIDAndResetAbilities(t *testing.T) {
	h := newHarness(t, Config{})
	w := h.open()
	w.send(codec.SetClientID, "worker-7")
	w.send(codec.CanDo, "a")
	w.send(codec.CanDoTimeout, "b", "1000")
	if got := w.admin("workers"); got != "1 127.0.0.1 worker-7 : a b\n.\n" {
		t.Fatalf("workers %q", got)
	}
	c := h.open()
	hd := c.submit(codec.SubmitJob, "a", "", "x")
	w.send(codec.GrabJob)
	w.rec.take()
	w.send(codec.ResetAbilities)
	if got := w.admin("status"); got != "a\t1\t0\t0\nb\t0\t0\t0\n.\n" {
		t.Fatalf("status %q", got)
	}
	w.send(codec.WorkComplete, hd, "x")
	w.expect("ERROR JOB_NOT_FOUND Job given in work result not found")
}

// TestCanDoTimeoutFloor: as gearmand, a CAN_DO_TIMEOUT under a second
// takes the job back after a second, not after the milliseconds asked for.
func TestCanDoTimeoutFloor(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.open()
	hd := c.submit(codec.SubmitJob, "f", "", "x")
	w := h.open()
	w.send(codec.CanDoTimeout, "f", "30")
	w.send(codec.GrabJob)
	w.expect("JOB_ASSIGN " + hd + " f x")
	other := h.open()
	other.send(codec.CanDo, "f")
	other.send(codec.PreSleep)
	h.clk.Advance(999 * time.Millisecond)
	other.expect()
	h.clk.Advance(time.Millisecond)
	other.expect("NOOP") // requeued after the second gearmand gives
	other.send(codec.GrabJob)
	other.expect("JOB_ASSIGN " + hd + " f x")
	other.send(codec.WorkComplete, hd, "ok")
	c.expect("WORK_COMPLETE " + hd + " ok")
}
