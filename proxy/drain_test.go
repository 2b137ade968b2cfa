package proxy

import (
	"net"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// TestGearmanDrain: after Drain, a new connection is refused and SUBMIT_*
// gets ERROR QUEUE_ERROR, while a worker keeps its job, completes it (its
// client gets WORK_COMPLETE) and grabs queued ones; Idle turns true once
// no job runs.
func TestGearmanDrain(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		name := "loop"
		if goroutines {
			name = "goroutines"
		}
		t.Run(name, func(t *testing.T) {
			srv, err := NewGearmanServer(GearmanConfig{Engine: gearmanConfigForTest(), Goroutines: goroutines})
			if err != nil {
				t.Fatal(err)
			}
			addr := serveGearman(t, srv)
			client := glDial(t, addr)
			client.send(t, codec.SubmitJob, "f", "", "fg")
			client.expect(t, codec.JobCreated, "submit")
			client.send(t, codec.SubmitJobBg, "f", "", "bg")
			client.expect(t, codec.JobCreated, "submit")
			w := glDial(t, addr)
			w.send(t, codec.CanDo, "f")
			w.send(t, codec.GrabJob)
			job := w.expect(t, codec.JobAssign, "grab")
			if srv.Idle() {
				t.Fatal("idle with a job running")
			}

			srv.Drain()
			deadline := time.Now().Add(5 * time.Second)
			for { // Serve notices the closed listener asynchronously
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					break
				}
				c.Close()
				if time.Now().After(deadline) {
					t.Fatal("still accepting after Drain")
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, typ := range []codec.Type{codec.SubmitJob, codec.SubmitJobBg, codec.SubmitJobHighBg, codec.SubmitJobEpoch} {
				args := []string{"f", "", "late"}
				if typ == codec.SubmitJobEpoch {
					args = []string{"f", "", "0", "late"}
				}
				client.send(t, typ, args...)
				p := client.expect(t, codec.Error, typ.String()+" while draining")
				if string(p.Args[0]) != "QUEUE_ERROR" {
					t.Fatalf("%v while draining: ERROR %q", typ, p.Args)
				}
			}
			w.send(t, codec.WorkComplete, string(job.Args[0]), "done")
			client.expect(t, codec.WorkComplete, "the client of the job finished while draining")
			w.send(t, codec.GrabJob)
			job = w.expect(t, codec.JobAssign, "grab the queued job while draining")
			if srv.Idle() {
				t.Fatal("idle with a job running")
			}
			w.send(t, codec.WorkComplete, string(job.Args[0]), "")
			w.send(t, codec.EchoReq, "sync")
			w.expect(t, codec.EchoRes, "sync")
			if !srv.Idle() {
				t.Fatal("not idle once every job finished")
			}
		})
	}
}
