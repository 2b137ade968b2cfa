package gearman

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
)

// The scenarios of unassign_test.go against a real gearmand: the order in
// which the engine requeues a worker's jobs is gearmand's, and this is
// where that is checked for jobs finished out of order among many held.

func TestGearmandDropAfterOutOfOrderCompletes(t *testing.T) {
	dropAfterOutOfOrder(t, newGearmandBackend(t))
}

func TestGearmandCantDoAfterOutOfOrderCompletes(t *testing.T) {
	cantDoAfterOutOfOrder(t, newGearmandBackend(t))
}

// gearmandBackend runs a scenario on a real gearmand.
type gearmandBackend struct {
	t      *testing.T
	addr   string
	client *gdWire
}

func newGearmandBackend(t *testing.T) *gearmandBackend {
	addr := testutil.StartGearmand(t)
	b := &gearmandBackend{t: t, addr: addr}
	b.client = b.dial()
	t.Cleanup(b.client.close)
	return b
}

func (b *gearmandBackend) dial() *gdWire {
	b.t.Helper()
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		b.t.Fatal(err)
	}
	return &gdWire{t: b.t, nc: nc, br: bufio.NewReader(nc)}
}

func (b *gearmandBackend) submitBg(fn, data string) {
	b.client.send(codec.SubmitJobBg, fn, "", data)
	b.client.expect(codec.JobCreated)
}

func (b *gearmandBackend) worker() worker { return b.dial() }

// settle polls the admin status until no job of fn runs: gearmand
// requeues a closed connection's jobs when it notices the close.
func (b *gearmandBackend) settle(fn string) {
	b.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status := b.client.admin("status")
		running := ""
		for _, l := range strings.Split(status, "\n") {
			if f := strings.Split(l, "\t"); len(f) == 4 && f[0] == fn {
				running = f[2]
			}
		}
		if running == "0" {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("gearmand still runs jobs of %s:\n%s", fn, status)
		}
		time.Sleep(time.Millisecond)
	}
}

// gdWire is one connection to gearmand.
type gdWire struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func (c *gdWire) send(t codec.Type, args ...string) {
	c.t.Helper()
	var a [][]byte
	for _, s := range args {
		a = append(a, []byte(s))
	}
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(codec.AppendPacket(nil, codec.Req, t, a...)); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response packet.
func (c *gdWire) recv() *codec.Packet {
	c.t.Helper()
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, codec.HeaderSize)
	if _, err := io.ReadFull(c.br, b); err != nil {
		c.t.Fatalf("reading from gearmand: %v", err)
	}
	b = append(b, make([]byte, binary.BigEndian.Uint32(b[8:]))...)
	if _, err := io.ReadFull(c.br, b[codec.HeaderSize:]); err != nil {
		c.t.Fatalf("reading from gearmand: %v", err)
	}
	var p codec.Packet
	if err := p.UnmarshalBinary(b); err != nil {
		c.t.Fatalf("from gearmand: %v", err)
	}
	return &p
}

// expect reads one packet, which must be of type want.
func (c *gdWire) expect(want codec.Type) *codec.Packet {
	c.t.Helper()
	p := c.recv()
	if p.Type != want {
		c.t.Fatalf("gearmand sent %v, want %v", p, want)
	}
	return p
}

func (c *gdWire) grab() (heldJob, bool) {
	c.t.Helper()
	c.send(codec.GrabJob)
	p := c.recv()
	switch p.Type {
	case codec.NoJob:
		return heldJob{}, false
	case codec.JobAssign:
		return heldJob{string(p.Handle()), string(p.Data())}, true
	}
	c.t.Fatalf("GRAB_JOB: gearmand sent %v", p)
	return heldJob{}, false
}

// sync sends ECHO_REQ and waits for its answer: gearmand handles a
// connection's packets in order, so everything before it was handled, and
// nothing else may arrive meanwhile.
func (c *gdWire) sync() {
	c.t.Helper()
	c.send(codec.EchoReq, "sync")
	c.expect(codec.EchoRes)
}

// admin sends a text command and returns the reply up to its "." line.
func (c *gdWire) admin(cmd string) string {
	c.t.Helper()
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.nc, cmd+"\n"); err != nil {
		c.t.Fatal(err)
	}
	var b strings.Builder
	for {
		l, err := c.br.ReadString('\n')
		if err != nil {
			c.t.Fatalf("admin %q: %v", cmd, err)
		}
		if l == ".\n" {
			return b.String()
		}
		b.WriteString(l)
	}
}

func (c *gdWire) close() { _ = c.nc.Close() }
