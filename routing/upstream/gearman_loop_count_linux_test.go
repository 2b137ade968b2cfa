//go:build linux

package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/routing"
)

// TestGearmanLoopUnsolicitedReplyDuringSend: an unsolicited reply (ERROR for a WORK_* the server does not know) read
// in the same batch as another goroutine's Send must not cancel that
// Send's count: its reply never comes, so the session must time out.
func TestGearmanLoopUnsolicitedReplyDuringSend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(gearman.AppendPacket(nil, gearman.Res, gearman.Error, []byte(gearman.CodeJobNotFound), []byte("x")))
		_, _ = io.Copy(io.Discard, c)
	}()
	g := newGearman(t, ln.Addr().String(), 100*time.Millisecond)
	got, sent := make(chan struct{}), make(chan struct{})
	ended := make(chan error, 1)
	c, err := g.OpenLoop(context.Background(), routing.GearmanEvents{
		Packet: func(p *gearman.Packet) {
			if p.Type == gearman.Error {
				close(got)
				<-sent
			}
		},
		Closed: func(err error) { ended <- err },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serveLoop(t, c)
	<-got
	if err := c.Send(&gearman.Packet{Magic: gearman.Req, Type: gearman.EchoReq, Args: [][]byte{[]byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	close(sent)
	select {
	case err := <-ended:
		if !errors.Is(err, routing.ErrTimeout) {
			t.Fatalf("ended with %v, want ErrTimeout", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("an ECHO_REQ with no answer never timed out: its count was cancelled")
	}
}
