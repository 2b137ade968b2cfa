package gearman

import (
	"fmt"
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// handles is an Output that keeps the handle of every JOB_ASSIGN.
type handles struct{ h [][]byte }

func (o *handles) WritePacket(p *codec.Packet) {
	if p.Type == codec.JobAssign {
		o.h = append(o.h, append([]byte(nil), p.Args[0]...))
	}
}
func (o *handles) WriteText([]byte) {}

// BenchmarkEngineHeldComplete: one worker grabs n background jobs, then
// completes them all, oldest first (grab) or newest first (reverse). Only
// the completions are timed; ns/job is the cost of one WORK_COMPLETE among
// n held jobs, which must not grow with n.
func BenchmarkEngineHeldComplete(b *testing.B) {
	for _, order := range []string{"grab", "reverse"} {
		for _, n := range []int{1000, 10000, 100000} {
			b.Run(fmt.Sprintf("%s/n=%d", order, n), func(b *testing.B) {
				benchHeldComplete(b, n, order == "reverse")
			})
		}
	}
}

func benchHeldComplete(b *testing.B, n int, reverse bool) {
	e, _ := New(Config{HandlePrefix: "H:bench"})
	defer e.Stop()
	c := e.NewSession(SessionInfo{}, &discard{})
	out := &handles{}
	w := e.NewSession(SessionInfo{}, out)
	defer w.Close()
	fn, body := []byte("f"), make([]byte, 100)
	w.Handle(req(codec.CanDo, fn))
	submit := req(codec.SubmitJobBg, fn, nil, body)
	grab := req(codec.GrabJob)
	complete := req(codec.WorkComplete, nil, []byte("ok"))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		out.h = out.h[:0]
		for range n {
			c.Handle(submit)
			w.Handle(grab)
		}
		if len(out.h) != n {
			b.Fatalf("worker holds %d jobs, want %d", len(out.h), n)
		}
		b.StartTimer()
		for i := range n {
			k := i
			if reverse {
				k = n - 1 - i
			}
			complete.Args[0] = out.h[k]
			w.Handle(complete)
		}
	}
	b.StopTimer()
	if a := w.Assigned(); a != 0 {
		b.Fatalf("worker still holds %d jobs", a)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
}
