package proxy

import (
	"net"
	"testing"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
)

// BenchmarkGearmanGatewayForeground is BenchmarkGearmanServerForeground
// through a gateway: "local" routes the function to the local engine (the
// gateway session's own cost), "gearmand" to a real gearmand, and
// "gearmand-direct" talks to that gearmand without jobgate, for
// comparison. Client and worker both connect to the gateway.
func BenchmarkGearmanGatewayForeground(b *testing.B) {
	up := testutil.StartGearmand(b)
	for _, mode := range []string{"local", "gearmand", "gearmand-direct"} {
		b.Run(mode, func(b *testing.B) {
			addr := up
			if mode != "gearmand-direct" {
				c, err := config.Upstreams([]string{up}, nil)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "local" {
					c.Routes.GearmanDefault = config.LocalName
				}
				addr, _ = startGearmanGateway(b, c, gearmanConfigForTest())
			}
			runForegroundBench(b, addr)
		})
	}
}

// runForegroundBench runs b.N foreground jobs one at a time through addr.
func runForegroundBench(b *testing.B, addr string) {
	dial := func() (net.Conn, *codec.Reader) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { nc.Close() })
		return nc, codec.NewReader(nc, codec.Limits{})
	}
	c, cr := dial()
	w, wr := dial()
	expect := func(r *codec.Reader, t codec.Type) codec.Frame {
		f, err := r.ReadFrame()
		if err != nil || f.Packet.Type != t {
			b.Fatalf("want %v, got %v %v", t, f.String(), err)
		}
		return f
	}
	fn := []byte("bench")
	w.Write(codec.AppendPacket(nil, codec.Req, codec.CanDo, fn))
	submit := codec.AppendPacket(nil, codec.Req, codec.SubmitJob, fn, nil, make([]byte, 100))
	grab := codec.AppendPacket(nil, codec.Req, codec.GrabJob)
	var out []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Write(submit)
		expect(cr, codec.JobCreated)
		w.Write(grab)
		f := expect(wr, codec.JobAssign)
		out = codec.AppendPacket(out[:0], codec.Req, codec.WorkComplete, f.Packet.Arg(0), fn)
		w.Write(out)
		expect(cr, codec.WorkComplete)
	}
}
