package upstream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/routing"
)

// holdingConn is a connection whose Write, once armed, does not return
// after the write that completes a packet of hold bytes until release is
// closed: it stands for a Send goroutine the scheduler stops right after
// the packet went out.
type holdingConn struct {
	net.Conn
	mu      sync.Mutex
	hold    int // bytes left of the held packet; 0: not armed
	release chan struct{}
}

func (c *holdingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	armed := c.hold > 0
	if armed {
		c.hold -= n
	}
	last := armed && c.hold <= 0
	c.mu.Unlock()
	if last {
		select {
		case <-c.release:
		case <-time.After(wait):
		}
	}
	return n, err
}

// TestGearmanReplyDuringSend: a request larger than the write buffer goes
// straight to the socket from Send, so its reply can be read before Send
// returns. It must still be counted as answered: a reply counted before
// its request would leave a request outstanding forever, and the session
// would time out on a healthy, idle server.
func TestGearmanReplyDuringSend(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), time.Second)
	nc, err := g.cfg.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hc := &holdingConn{Conn: nc, release: make(chan struct{})}
	replies := make(chan gearman.Packet, 1)
	s := &gearmanSession{cfg: &g.cfg, nc: hc, ev: routing.GearmanEvents{
		Packet: func(p *gearman.Packet) {
			replies <- p.Clone()
			close(hc.release) // the one reply this test expects
		},
	}, w: gearman.NewWriter(hc)}
	go s.readLoop(gearman.NewReader(hc, g.cfg.Limits))
	t.Cleanup(s.Close)

	body := bytes.Repeat([]byte("b"), 4*gearman.DefaultWriterSize)
	p := gearman.Packet{Magic: gearman.Req, Type: gearman.SubmitJobBg, Args: [][]byte{[]byte("f"), nil, body}}
	hc.hold = wireSize(&p)
	if err := s.Send(&p); err != nil {
		t.Fatal(err)
	}
	// Send returned after the reply was delivered (or after wait).
	select {
	case r := <-replies:
		if r.Type != gearman.JobCreated {
			t.Fatalf("got %v, want JOB_CREATED", &r)
		}
	default:
		t.Fatal("no reply while Send was held")
	}
	s.mu.Lock()
	n, d := s.outstanding, s.deadline
	s.mu.Unlock()
	if n != 0 || !d.IsZero() {
		t.Fatalf("after the reply: %d requests outstanding, reply deadline %v; want none", n, d)
	}
}

// TestGearmanInvalidSendNotCounted: a request Send refuses (the caller's
// mistake, nothing written) awaits no reply, so it must not stay counted;
// the session still works.
func TestGearmanInvalidSendNotCounted(t *testing.T) {
	g := newGearman(t, testutil.StartGearmand(t), time.Second)
	c, pk := openGearman(t, g)
	// Larger than the write buffer, so that Send counts it before writing.
	body := bytes.Repeat([]byte("b"), 4*gearman.DefaultWriterSize)
	bad := gearman.Packet{Magic: gearman.Req, Type: gearman.SubmitJob, Args: [][]byte{[]byte("f\x00"), nil, body}}
	if err := c.Send(&bad); !errors.Is(err, gearman.ErrInvalidPacket) {
		t.Fatalf("Send of %q: %v, want ErrInvalidPacket", bad.Args[0], err)
	}
	s := c.(*gearmanSession)
	s.mu.Lock()
	n := s.outstanding
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d requests outstanding after a refused Send, want 0", n)
	}
	send(t, c, gearman.EchoReq, "x")
	flush(t, c)
	pk.expect(t, gearman.EchoRes)
}
