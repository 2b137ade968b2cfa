//go:build linux

package proxy

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/jobserver/gearman"
)

// countFastSubmits counts the requests the submit fast path sends until
// the test ends.
func countFastSubmits(t *testing.T) *atomic.Int64 {
	var n atomic.Int64
	f := func() { n.Add(1) }
	gwFastHook.Store(&f)
	t.Cleanup(func() { gwFastHook.Store(nil) })
	return &n
}

// TestGearmanGatewayFastSubmit: pipelined submits to open sessions and
// to open lines take the fast path; the first submit to a
// backend (which dials), one to the local engine, and one whose backend's
// session died do not, and every job still lands where the routing says.
func TestGearmanGatewayFastSubmit(t *testing.T) {
	port := testutil.FreePort(t)
	g2 := ownGearmand(t, port)
	st := startGatewaySetup(t, []string{testutil.StartGearmand(t), net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, config.Breaker{})
	hits := countFastSubmits(t)
	f1, f2 := st.fnOwnedBy(t, "f", 1), st.fnOwnedBy(t, "f", 2)
	steps := []struct {
		typ  codec.Type
		fn   string
		want string // handle prefix
		fast bool
	}{
		{codec.SubmitJobBg, f1, "@1:", false}, // dials g1, off the loop
		{codec.SubmitJobBg, f1, "@1:", true},
		{codec.SubmitJobHighBg, f1, "@1:", true},
		{codec.SubmitJobBg, f2, "@2:", false}, // dials g2
		{codec.SubmitJobLowBg, f2, "@2:", true},
		{codec.SubmitJobBg, "local.x", "H:jobgate:", false},
		{codec.SubmitJobBg, f2, "@2:", true},
		{codec.SubmitJobBg, f1, "@1:", true},
		{codec.SubmitJob, f1, "@1:", true}, // foreground: on the line too
		{codec.OptionReq, "exceptions", "", false},
		{codec.SubmitJob, f1, "@1:", false}, // with exceptions: its own session, dialled
		{codec.SubmitJob, f1, "@1:", true},
		{codec.SubmitJobBg, f1, "@1:", true}, // now on that session, not the line
	}
	c := dialGW(t, st.addr)
	var batch []byte
	wantHits := int64(0)
	for i, s := range steps {
		if s.typ == codec.OptionReq {
			batch = append(batch, pkt(s.typ, s.fn)...)
			continue
		}
		batch = append(batch, pkt(s.typ, s.fn, "", fmt.Sprintf("job-%d", i))...)
		if s.fast {
			wantHits++
		}
	}
	c.write(batch) // one write: the loop reads them as one pipeline
	for i, s := range steps {
		if s.typ == codec.OptionReq {
			c.expect(codec.OptionRes)
			continue
		}
		if h := string(c.expect(codec.JobCreated).Args[0]); !strings.HasPrefix(h, s.want) {
			t.Fatalf("step %d (%s): handle %q, want prefix %q", i, s.fn, h, s.want)
		}
	}
	loopServed(t, st.srv)
	if got := hits.Load(); got != wantHits {
		t.Fatalf("fast path sent %d submits, want %d", got, wantHits)
	}
	if got, want := st.upstreamStatus(t, 1, f1), f1+"\t8\t0\t0"; got != want {
		t.Errorf("g1: %q, want %q", got, want)
	}
	if got, want := st.upstreamStatus(t, 2, f2), f2+"\t3\t0\t0"; got != want {
		t.Errorf("g2: %q, want %q", got, want)
	}

	// g2 dies: once the loop has seen its session end, f2's submits fail
	// over to g1 on the general path (which dials g2 again, and fails),
	// never on the fast one. Until then one may still go to the dying
	// session and get an ERROR.
	_ = g2.Process.Kill()
	_ = g2.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		before := hits.Load()
		c.send(codec.SubmitJobBg, f2, "", "after-"+strconv.Itoa(i))
		p := c.next()
		if p.Type == codec.JobCreated {
			if h := string(p.Args[0]); !strings.HasPrefix(h, "@1:") {
				t.Fatalf("after g2 died: handle %q, want g1's", h)
			}
			if hits.Load() != before {
				t.Fatal("a submit to a dead backend took the fast path")
			}
			break
		}
		if p.Type != codec.Error {
			t.Fatalf("after g2 died: %v", p.String())
		}
		if time.Now().After(deadline) {
			t.Fatal("f2 never failed over to g1")
		}
	}
	c.quiet()
}

// TestGearmanGatewayFastSubmitReload: the fast path's cached route does
// not outlive a reload, even when the new backend's session is open.
func TestGearmanGatewayFastSubmitReload(t *testing.T) {
	up := []string{testutil.StartGearmand(t), testutil.StartGearmand(t)}
	cfg := func(a, b string) *config.Config {
		c := reloadConfig(t, up, a)
		c.Routes.Gearman = []config.Route{{Prefix: "a.", Backend: a}, {Prefix: "b.", Backend: b}}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	addr, srv := startGearmanGateway(t, cfg("g1", "g2"), gearman.Config{HandlePrefix: "H:jobgate"})
	hits := countFastSubmits(t)
	c := dialGW(t, addr)
	submit := func(fn, want string) {
		t.Helper()
		c.send(codec.SubmitJobBg, fn, "", "x")
		if h := string(c.expect(codec.JobCreated).Args[0]); !strings.HasPrefix(h, want) {
			t.Fatalf("%s: handle %q, want prefix %q", fn, h, want)
		}
	}
	submit("a.x", "@1:") // dials g1
	submit("b.x", "@2:") // dials g2
	submit("a.x", "@1:") // fast
	loopServed(t, srv)
	if hits.Load() != 1 {
		t.Fatalf("fast path sent %d submits before the reload, want 1", hits.Load())
	}
	apply, err := srv.PrepareReload(cfg("g2", "g1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	submit("a.x", "@2:") // both sessions open: fast, on the new route
	submit("b.x", "@1:")
	if hits.Load() != 3 {
		t.Fatalf("fast path sent %d submits, want 3", hits.Load())
	}
}

// TestGearmanGatewayRawOf: a request is forwarded as the bytes it came in
// only when it is the packet the connection's reader last returned,
// unchanged; a copy, a rewritten function or another packet is encoded.
func TestGearmanGatewayRawOf(t *testing.T) {
	wire := pkt(codec.SubmitJobBg, "fn", "", "data")
	rd := codec.NewReader(bytes.NewReader(append(append([]byte(nil), wire...), pkt(codec.EchoReq, "x")...)), codec.Limits{})
	s := &gwSession{c: &gearmanConn{rd: rd}}
	f, err := rd.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	p := f.Packet
	if raw := s.rawOf(&p); !bytes.Equal(raw, wire) {
		t.Fatalf("the packet read: raw %q, want %q", raw, wire)
	}
	if cp := p.Clone(); s.rawOf(&cp) != nil {
		t.Fatal("a copy of the packet was taken for the bytes read")
	}
	moved := codec.Packet{Magic: p.Magic, Type: p.Type, Args: [][]byte{[]byte("other"), p.Args[1], p.Args[2]}}
	if s.rawOf(&moved) != nil {
		t.Fatal("a packet with another function was taken for the bytes read")
	}
	longer := codec.Packet{Magic: p.Magic, Type: p.Type, Args: [][]byte{p.Args[0], p.Args[1], []byte("more data")}}
	if s.rawOf(&longer) != nil {
		t.Fatal("a packet with other data was taken for the bytes read")
	}
	same := codec.Packet{Magic: p.Magic, Type: p.Type, Args: [][]byte{p.Args[0], p.Args[1], []byte("DATA")}}
	if s.rawOf(&same) != nil {
		t.Fatal("a packet with other data of the same length was taken for the bytes read")
	}
	retyped := codec.Packet{Magic: p.Magic, Type: codec.SubmitJob, Args: p.Args}
	if s.rawOf(&retyped) != nil {
		t.Fatal("a packet of another type was taken for the bytes read")
	}
	if _, err := rd.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if s.rawOf(&p) != nil {
		t.Fatal("the bytes of a packet were used after the next one was read")
	}
}
