package gearman

import (
	"runtime"
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
)

// discard is an Output that keeps only the last handle it saw.
type discard struct{ handle []byte }

func (d *discard) WritePacket(p *codec.Packet) {
	if p.Type == codec.JobAssign || p.Type == codec.JobCreated {
		d.handle = append(d.handle[:0], p.Args[0]...)
	}
}
func (d *discard) WriteText([]byte) {}

func req(t codec.Type, args ...[]byte) *codec.Packet {
	return &codec.Packet{Magic: codec.Req, Type: t, Args: args}
}

// BenchmarkEngineForeground: submit, grab, complete, one job at a time.
func BenchmarkEngineForeground(b *testing.B) { benchForeground(b, nil, nil) }

// benchForeground runs foreground jobs one at a time. With traced, every
// job is traced: traced gives the session its creation context cr before
// each submit, as the proxy does, and the grab's trace is read as the
// proxy reads it; hook, if any, is the engine's trace hook.
func benchForeground(b *testing.B, hook TraceHook, traced func(c *Session, cr Creation)) {
	e, _ := New(Config{HandlePrefix: "H:bench"})
	defer e.Stop()
	if hook != nil {
		e.SetTraceHook(hook)
	}
	cout, wout := &discard{}, &discard{}
	c := e.NewSession(SessionInfo{}, cout)
	w := e.NewSession(SessionInfo{}, wout)
	fn, body, result := []byte("f"), make([]byte, 100), []byte("ok")
	w.Handle(req(codec.CanDo, fn))
	submit := req(codec.SubmitJob, fn, nil, body)
	grab := req(codec.GrabJob)
	complete := req(codec.WorkComplete, nil, result)
	cr := testCreation(9)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if traced != nil {
			traced(c, cr)
		}
		c.Handle(submit)
		w.Handle(grab)
		if traced != nil {
			if jt, ok := w.LastJobTrace(); !ok || jt.Attempt != 1 {
				b.Fatal("no trace")
			}
		}
		complete.Args[0] = wout.handle
		w.Handle(complete)
	}
}

// BenchmarkEngineBackgroundSubmit: background submits into a growing
// queue.
func BenchmarkEngineBackgroundSubmit(b *testing.B) {
	e, _ := New(Config{HandlePrefix: "H:bench"})
	defer e.Stop()
	c := e.NewSession(SessionInfo{}, &discard{})
	submit := req(codec.SubmitJobBg, []byte("f"), nil, make([]byte, 100))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Handle(submit)
	}
}

// BenchmarkEngineEcho: the cheapest request.
func BenchmarkEngineEcho(b *testing.B) {
	e, _ := New(Config{HandlePrefix: "H:bench"})
	defer e.Stop()
	c := e.NewSession(SessionInfo{}, &discard{})
	echo := req(codec.EchoReq, make([]byte, 100))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.Handle(echo)
	}
}

// TestQueuedJobMemory keeps a queued 100-byte background job under 450
// bytes of heap (gearmand: about 900).
func TestQueuedJobMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100k jobs")
	}
	e, _ := New(Config{HandlePrefix: "H:bench"})
	defer e.Stop()
	c := e.NewSession(SessionInfo{}, &discard{})
	submit := req(codec.SubmitJobBg, []byte("f"), nil, make([]byte, 100))
	const n = 100000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		c.Handle(submit)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per queued 100-byte background job", per)
	if per > 450 {
		t.Fatalf("%.0f bytes per queued job, want <= 450", per)
	}
	runtime.KeepAlive(e)
}
