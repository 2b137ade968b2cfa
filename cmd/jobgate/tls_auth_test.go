package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
)

// TestBinaryTLSClientAuthRules runs the binary with tls.client_auth
// require, a client CA and identities by certificate name: a go-beanstalk
// client whose certificate names the producer puts into its tube and is
// denied (NOT_FOUND) another; a Gearman client with the consumer's name is
// denied SUBMIT_JOB (ERROR PERMISSION_DENIED). A silent client is dropped
// after -limits-handshake-timeout, and the failures show in /metrics by
// reason.
func TestBinaryTLSClientAuthRules(t *testing.T) {
	dir := t.TempDir()
	ca, tlsSection := tlsFiles(t, dir)
	clientCA := testutil.NewCA(t, "jobgate client CA")
	clients := testutil.WriteFile(t, dir, "clients.pem", clientCA.PEM)
	file := writeFile(t, "tls-auth.yaml", `
auth:
  enabled: true
  identities:
    - name: producer
      cert_names: ["producer.test"]
    - name: consumer
      cert_names: ["consumer.test"]
  rules:
    - identity: producer
      produce: ["emails"]
    - identity: consumer
      consume: ["emails"]
`+tlsSection+fmt.Sprintf("  client_auth: require\n  client_ca_file: %q\n", clients))
	p := startJobgate(t, 3, "-config", file, "-gearman", "", "-gearman-tls", "127.0.0.1:0", "-beanstalk", "",
		"-beanstalk-tls", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-data", "", "-limits-handshake-timeout", "200ms")
	conf := func(cn string) *tls.Config {
		return &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1",
			Certificates: []tls.Certificate{clientCA.Client(t, cn)}}
	}

	bc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", p.addrs["beanstalk_tls"], conf("producer.test"))
	if err != nil {
		t.Fatal(err)
	}
	bc.SetDeadline(time.Now().Add(10 * time.Second))
	bs := gobeanstalk.NewConn(bc)
	defer bs.Close()
	if _, err := (&gobeanstalk.Tube{Conn: bs, Name: "emails"}).Put([]byte("hi"), 1, 0, time.Minute); err != nil {
		t.Fatalf("producer put into emails: %v", err)
	}
	_, err = (&gobeanstalk.Tube{Conn: bs, Name: "invoices"}).Put([]byte("hi"), 1, 0, time.Minute)
	if !errors.Is(err, gobeanstalk.ErrNotFound) {
		t.Fatalf("producer put into invoices: %v, want NOT_FOUND", err)
	}
	if _, err := (&gobeanstalk.Tube{Conn: bs, Name: "emails"}).Put([]byte("again"), 1, 0, time.Minute); err != nil {
		t.Fatalf("the connection stays usable after a denial: %v", err)
	}

	gc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", p.addrs["gearman_tls"], conf("consumer.test"))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	gc.SetDeadline(time.Now().Add(10 * time.Second))
	w := codec.NewWriter(gc)
	r := codec.NewReader(gc, codec.Limits{})
	w.WritePacket(codec.Req, codec.SubmitJob, []byte("emails"), nil, []byte("x"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f, err := r.ReadFrame()
	if err != nil || f.Packet.Type != codec.Error || len(f.Packet.Args) < 1 || string(f.Packet.Args[0]) != "PERMISSION_DENIED" {
		t.Fatalf("consumer SUBMIT_JOB: %v %s, want ERROR PERMISSION_DENIED", err, f.String())
	}
	gearmanEcho(t, gc, "still served")

	// A silent client is dropped after the flag's 200ms, plaintext is
	// refused; both are counted.
	silent, err := net.DialTimeout("tcp", p.addrs["beanstalk_tls"], 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || isNetTimeout(err) {
		t.Fatalf("silent client: %v, want closed by the server", err)
	}
	plain, err := net.DialTimeout("tcp", p.addrs["gearman_tls"], 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(plain, "status\n")
	if b, err := io.ReadAll(plain); err == nil && strings.Contains(string(b), ".\n") {
		t.Fatalf("plaintext on the TLS port answered %q", b)
	}
	want := []string{
		`jobgate_tls_handshake_failures_total{protocol="beanstalk",reason="timeout"} 1`,
		`jobgate_tls_handshake_failures_total{protocol="gearman",reason="protocol_version"} 1`,
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + p.addrs["admin"] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing := ""
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s", missing)
		}
		time.Sleep(20 * time.Millisecond) // polled with a deadline
	}
	stopJobgate(t, p)
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
