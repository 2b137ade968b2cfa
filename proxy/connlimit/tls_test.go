package connlimit

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
)

// TestWriterTLSSlowReader: over TLS, with no write timeout, a client that
// does not read is cut off and the Writer finishes: the stuck TLS write is
// ended by the past deadline and the connection closed without hanging on
// a close_notify the client will never read.
func TestWriterTLSSlowReader(t *testing.T) {
	rawServer, rawClient := tcpPair(t)
	cert, pool := selfSigned(t)
	server := tls.Server(rawServer, &tls.Config{Certificates: []tls.Certificate{cert}})
	client := tls.Client(rawClient, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	handshake := make(chan error, 1)
	go func() { handshake <- client.Handshake() }()
	if err := server.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshake; err != nil {
		t.Fatal(err)
	}

	var cut cutoffs
	w := NewWriter(server, WriterOptions{Limit: 256 << 10, OnCutoff: cut.record})
	p := make([]byte, 1<<10)
	var err error
	for range 64 << 10 {
		if _, err = w.Write(p); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrSlowReader) {
		t.Fatalf("Write: %v, want ErrSlowReader", err)
	}
	select {
	case <-w.Done():
	case <-time.After(20 * time.Second): // a hang, not a timing assumption
		t.Fatal("Writer did not finish after cutting off a TLS client")
	}
	if got := cut.get(); len(got) != 1 || got[0] != ReasonSlowReader {
		t.Errorf("OnCutoff calls %v", got)
	}
}

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	return testutil.SelfSigned(t, "connlimit test")
}
