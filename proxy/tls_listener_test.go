package proxy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	gmcodec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/proxy"
)

// TestTLSListenerClose: closing the listener drops handshakes in progress
// (a silent client is closed at once, not after the handshake timeout),
// and Accept then reports net.ErrClosed.
func TestTLSListenerClose(t *testing.T) {
	t.Parallel()
	cert, _ := testutil.SelfSigned(t, "listener")
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := proxy.NewTLSListener(inner, &tls.Config{Certificates: []tls.Certificate{cert}}, proxy.TLSListenerOptions{HandshakeTimeout: time.Hour})
	silent, err := net.DialTimeout("tcp", l.Addr().String(), tlsTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	// The silent client's handshake is pending (or about to be): Close
	// must end it rather than wait an hour.
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
	case <-time.After(tlsTimeout):
		t.Fatal("Close waits for a pending handshake")
	}
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	silent.SetReadDeadline(time.Now().Add(tlsTimeout))
	if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("silent client after Close: %v, want closed", err)
	}
}

// TestTLSGearmanSlowConsumer: a TLS client that submits a job and stops
// reading is cut off once MaxOutput bytes wait for it, while the worker
// feeding it (on the plain port) goes on being served.
func TestTLSGearmanSlowConsumer(t *testing.T) {
	t.Parallel()
	f := startTLSFixture(t, tlsFixtureOptions{})
	srv, err := proxy.NewGearmanServer(proxy.GearmanConfig{MaxOutput: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	plainL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsInner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(plainL)
	go srv.Serve(proxy.NewTLSListener(tlsInner, f.mgr.ServerConfig(), proxy.TLSListenerOptions{}))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), tlsTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()

	client, err := dialTLS(t, tlsInner.Addr().String(), f.clientConf())
	if err != nil {
		t.Fatal(err)
	}
	cc := newGmConn(client)
	cc.send(t, gmcodec.SubmitJob, "f", "", "x")
	cc.expect(t, gmcodec.JobCreated)

	wn, err := net.DialTimeout("tcp", plainL.Addr().String(), tlsTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer wn.Close()
	wn.SetDeadline(time.Now().Add(2 * tlsTimeout))
	w := newGmConn(wn)
	w.send(t, gmcodec.CanDo, "f")
	w.send(t, gmcodec.GrabJob)
	handle := string(w.expect(t, gmcodec.JobAssign).Handle())
	// 32 MiB of WORK_DATA for a client that never reads: far more than
	// socket buffers and MaxOutput hold.
	chunk := gmcodec.AppendPacket(nil, gmcodec.Req, gmcodec.WorkData, []byte(handle), make([]byte, 1<<20))
	for i := range 32 {
		if _, err := wn.Write(chunk); err != nil {
			t.Fatalf("worker write %d: %v", i, err)
		}
	}
	if err := echo(wn, "alive"); err != nil {
		t.Fatalf("worker blocked or cut off: %v", err)
	}
	// The server closed the client: draining it ends, not times out.
	client.SetReadDeadline(time.Now().Add(tlsTimeout))
	if _, err := io.Copy(io.Discard, client); isTimeout(err) {
		t.Fatalf("slow TLS client was not closed: %v", err)
	}
}
