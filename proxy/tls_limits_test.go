package proxy_test

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"

	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/metrics"
	"github.com/jobgate/jobgate/proxy"
)

// tlsLimitFixture is a Beanstalk server with limits and metrics on a TLS
// listener requiring client certificates from ca.
type tlsLimitFixture struct {
	srv  *proxy.BeanstalkServer
	m    *metrics.Metrics
	ca   *testutil.CA
	addr string
}

func startTLSLimited(t *testing.T, lim proxy.Limits) *tlsLimitFixture {
	t.Helper()
	f := &tlsLimitFixture{ca: testutil.NewCA(t, "limits CA"), m: metrics.New(metrics.Options{NoRuntimeCollectors: true})}
	srv, err := proxy.NewBeanstalkServer(proxy.BeanstalkConfig{ConnLimits: lim, Metrics: f.m})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	inner := testutil.Listen(t)
	conf := f.ca.MutualTLS(t)
	conf.ClientAuth = tls.RequireAndVerifyClientCert
	// A handshake timeout in the options that the server's limits must
	// override: an hour would hang the timeout tests.
	l := proxy.NewTLSListener(inner, conf, proxy.TLSListenerOptions{HandshakeTimeout: time.Hour})
	f.addr, _ = testutil.ServeOn(t, srv, l)
	return f
}

// silent connects without starting a handshake.
func (f *tlsLimitFixture) silent(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", f.addr, tlsTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// legit connects over TLS with a client certificate from the CA and
// puts a job; the connection stays open until the test ends.
func (f *tlsLimitFixture) legit(t *testing.T) error {
	t.Helper()
	conf := f.ca.ClientTLS(f.ca.Client(t, "worker"))
	conf.ServerName = "127.0.0.1"
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: tlsTimeout}, "tcp", f.addr, conf)
	if err != nil {
		return err
	}
	tc.SetDeadline(time.Now().Add(tlsTimeout))
	c := beanstalk.NewConn(tc)
	t.Cleanup(func() { c.Close() })
	_, err = c.Put([]byte("x"), 1, 0, time.Minute)
	return err
}

// closedAtOnce reads c: the server must close it, long before the hour
// of handshake timeout the listener would otherwise allow.
func closedAtOnce(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(tlsTimeout))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil || isTimeout(err) {
		t.Fatalf("%s: read %d, %v; want the connection closed by the server", what, n, err)
	}
}

// waitSample polls the metrics until key reaches want.
func (f *tlsLimitFixture) waitSample(t *testing.T, key string, want float64) {
	t.Helper()
	deadline := time.Now().Add(tlsTimeout)
	for {
		got := scrapeMetrics(t, f.m)[key]
		if got == want {
			return
		}
		if got > want || time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", key, got, want)
		}
		time.Sleep(5 * time.Millisecond) // polled with a deadline
	}
}

func failures(reason string) string {
	return `jobgate_tls_handshake_failures_total{protocol="beanstalk",reason="` + reason + `"}`
}

func rejected(reason string) string {
	return `jobgate_connections_rejected_total{protocol="beanstalk",reason="` + reason + `"}`
}

// TestTLSCapsBeforeHandshake: on a TLS listener the connection caps count
// connections from the TCP accept on, and max_handshakes caps those still
// in their handshake, so a flood of silent connects past a cap is closed
// at once (no plain-text reply, no handshake goroutine) and counted; a
// silent client that gives up frees its place, legit clients then get in,
// and the cap still holds.
func TestTLSCapsBeforeHandshake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		lim    proxy.Limits
		reason string
		// free: connections a finished handshake leaves room for (0: a
		// served client keeps its slot).
		free int
	}{
		{"max_connections", proxy.Limits{MaxConns: 5}, metrics.ReasonMaxConnections, 0},
		{"max_connections_per_ip", proxy.Limits{MaxConnsPerIP: 5}, metrics.ReasonMaxPerIP, 0},
		{"max_handshakes", proxy.Limits{MaxHandshakes: 5}, metrics.ReasonMaxHandshakes, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := startTLSLimited(t, tc.lim)
			var held []net.Conn
			for range 5 {
				held = append(held, f.silent(t))
			}
			// The kernel hands connections over in arrival order: the
			// five above fill the cap, each waiting in its handshake.
			const flood = 20
			for range flood {
				closedAtOnce(t, f.silent(t), "connect past "+tc.name)
			}
			f.waitSample(t, rejected(tc.reason), flood)

			held[0].Close()
			held[1].Close()
			f.waitSample(t, failures(metrics.TLSFailOther), 2) // EOF in the handshake: places freed
			for i := range 2 {
				if err := f.legit(t); err != nil {
					t.Fatalf("legit client %d within the cap: %v", i, err)
				}
			}
			for range tc.free {
				f.silent(t)
			}
			closedAtOnce(t, f.silent(t), "connect past "+tc.name+" after the legit clients")
			f.waitSample(t, rejected(tc.reason), flood+1)
		})
	}
}

// TestTLSHandshakeTimeoutFromLimits: the server's HandshakeTimeout
// overrides the listener's hour, a reload (SetLimits) changes it for the
// next handshakes, and each timeout is counted as such.
func TestTLSHandshakeTimeoutFromLimits(t *testing.T) {
	t.Parallel()
	f := startTLSLimited(t, proxy.Limits{HandshakeTimeout: 100 * time.Millisecond})
	closedAtOnce(t, f.silent(t), "silent client past the handshake timeout")
	f.waitSample(t, failures(metrics.TLSFailTimeout), 1)

	f.srv.SetLimits(proxy.Limits{HandshakeTimeout: time.Hour})
	c := f.silent(t)
	if err := f.legit(t); err != nil { // served while c waits
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("silent client after the reload to 1h: %v, want it still waiting", err)
	}
	f.srv.SetLimits(proxy.Limits{HandshakeTimeout: 100 * time.Millisecond})
	closedAtOnce(t, f.silent(t), "silent client after the reload back to 100ms")
	f.waitSample(t, failures(metrics.TLSFailTimeout), 2)
}

// TestTLSHandshakeFailureReasons: each kind of failed handshake is counted
// under its reason in jobgate_tls_handshake_failures_total.
func TestTLSHandshakeFailureReasons(t *testing.T) {
	t.Parallel()
	f := startTLSLimited(t, proxy.Limits{})

	// Plaintext on the TLS port.
	c := f.silent(t)
	c.Write([]byte("list-tubes\r\n"))
	closedAtOnce(t, c, "plaintext client")
	f.waitSample(t, failures(metrics.TLSFailProtocolVersion), 1)

	// A TLS 1.1 client.
	old := f.ca.ClientTLS(f.ca.Client(t, "old"))
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := tls.DialWithDialer(&net.Dialer{Timeout: tlsTimeout}, "tcp", f.addr, old); err == nil {
		t.Fatal("TLS 1.1 client accepted")
	}
	f.waitSample(t, failures(metrics.TLSFailProtocolVersion), 2)

	// No client certificate, then one from another CA: refused by the
	// server after the client's side of a TLS 1.3 handshake.
	other := testutil.NewCA(t, "other CA")
	for i, certs := range [][]tls.Certificate{nil, {other.Client(t, "intruder")}} {
		conf := f.ca.ClientTLS(certs...)
		conf.ServerName = "127.0.0.1"
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: tlsTimeout}, "tcp", f.addr, conf)
		if err == nil {
			tc.SetDeadline(time.Now().Add(tlsTimeout))
			_, err = tc.Read(make([]byte, 1))
			tc.Close()
		}
		if err == nil {
			t.Fatalf("client %d without a valid certificate served", i)
		}
		f.waitSample(t, failures(metrics.TLSFailBadCertificate), float64(i+1))
	}

	// A client that does not trust the server's certificate hangs up with
	// an alert.
	distrust := other.ClientTLS(f.ca.Client(t, "worker"))
	distrust.ServerName = "127.0.0.1"
	if _, err := tls.DialWithDialer(&net.Dialer{Timeout: tlsTimeout}, "tcp", f.addr, distrust); err == nil {
		t.Fatal("client trusting another CA accepted the server")
	}
	f.waitSample(t, failures(metrics.TLSFailBadCertificate), 3)
	f.waitSample(t, failures(metrics.TLSFailTimeout), 0)
	f.waitSample(t, failures(metrics.TLSFailOther), 0)
	if err := f.legit(t); err != nil {
		t.Fatal(err)
	}
}

// TestTLSListenerMaxHandshakesOption: a TLSListener no server limits
// applies its own MaxHandshakes.
func TestTLSListenerMaxHandshakesOption(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t, "listener CA")
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := proxy.NewTLSListener(inner, ca.MutualTLS(t), proxy.TLSListenerOptions{HandshakeTimeout: time.Hour, MaxHandshakes: 1})
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	f := &tlsLimitFixture{addr: inner.Addr().String()}
	first := f.silent(t)
	closedAtOnce(t, f.silent(t), "connect past MaxHandshakes")
	first.Close()
	conf := ca.ClientTLS()
	conf.ServerName = "127.0.0.1"
	deadline := time.Now().Add(tlsTimeout)
	for {
		// The listener sees the first client's close asynchronously.
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: tlsTimeout}, "tcp", f.addr, conf)
		if err == nil {
			defer tc.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no handshake once the first client left: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // polled with a deadline
	}
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(tlsTimeout):
		t.Fatal("the handshaken connection was not accepted")
	}
}
