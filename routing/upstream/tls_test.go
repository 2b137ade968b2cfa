package upstream

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"

	"github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
)

// tlsFront listens with TLS on loopback and forwards each connection to
// addr in clear, as a TLS-terminating proxy in front of a legacy server
// would. It returns its address and a client configuration trusting it.
func tlsFront(t *testing.T, addr string) (string, *tls.Config) {
	t.Helper()
	cert, roots := testutil.SelfSigned(t, "upstream test")
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
	})
	if err != nil {
		t.Fatal(err)
	}
	var conns connSet
	t.Cleanup(func() { l.Close(); conns.closeAll() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			conns.add(c)
			conns.add(up)
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return l.Addr().String(), &tls.Config{RootCAs: roots}
}

func TestTLS(t *testing.T) {
	t.Run("gearmand", func(t *testing.T) {
		addr, conf := tlsFront(t, testutil.StartGearmand(t))
		g, err := NewGearman(GearmanConfig{Config: Config{Addr: addr, TLS: conf, IOTimeout: wait}})
		if err != nil {
			t.Fatal(err)
		}
		c, pk := openGearman(t, g)
		send(t, c, gearman.EchoReq, "over tls")
		flush(t, c)
		if p := pk.expect(t, gearman.EchoRes); string(p.Data()) != "over tls" {
			t.Fatalf("echo %v", &p)
		}
		if err := g.Probe(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The certificate is checked: without the root, no session.
		g2, _ := NewGearman(GearmanConfig{Config: Config{Addr: addr, TLS: &tls.Config{}}})
		if _, err := g2.Open(context.Background(), eventsDiscard()); err == nil {
			t.Fatal("untrusted certificate accepted")
		}
	})
	t.Run("beanstalkd", func(t *testing.T) {
		addr, conf := tlsFront(t, testutil.StartBeanstalkd(t))
		b := newBeanstalk(t, BeanstalkConfig{Config: Config{Addr: addr, TLS: conf, IOTimeout: wait}})
		c, _ := openBeanstalk(t, b)
		rs := newResults()
		c.Do(&beanstalk.Command{Verb: beanstalk.Use, Tube: []byte("secure")}, rs.done(t))
		flush(t, c)
		if r := rs.wait(t, 1)[0]; r.err != nil || string(r.reply.Tube) != "secure" {
			t.Fatalf("use over tls: %+v", r)
		}
	})
}
