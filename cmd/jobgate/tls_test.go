package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	codec "github.com/jobgate/jobgate/codec/gearman"
	"github.com/jobgate/jobgate/internal/testutil"
)

// tlsFiles writes a server certificate for 127.0.0.1 from a new CA; it
// returns the CA and the config's tls section naming the files.
func tlsFiles(t *testing.T, dir string) (*testutil.CA, string) {
	t.Helper()
	ca := testutil.NewCA(t, "jobgate test CA")
	c, k := ca.Issue(t, testutil.Leaf{CN: "jobgate"})
	cert := testutil.WriteFile(t, dir, "cert.pem", c)
	key := testutil.WriteFile(t, dir, "key.pem", k)
	return ca, fmt.Sprintf("tls:\n  certificates:\n    - cert_file: %q\n      key_file: %q\n", cert, key)
}

// gearmanEcho round-trips an ECHO on nc.
func gearmanEcho(t *testing.T, nc net.Conn, data string) {
	t.Helper()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	w := codec.NewWriter(nc)
	w.WritePacket(codec.Req, codec.EchoReq, []byte(data))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f, err := codec.NewReader(nc, codec.Limits{}).ReadFrame()
	if err != nil || f.Packet.Type != codec.EchoRes || string(f.Packet.Data()) != data {
		t.Fatalf("ECHO: %v %s", err, f.String())
	}
}

// stopJobgate sends SIGTERM and waits for a clean exit.
func stopJobgate(t *testing.T, p *jobgateProc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("exit after SIGTERM: %v", p.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20s after SIGTERM")
	}
}

// TestBinaryServesTLS runs the binary with a TLS config file: Gearman on a
// plain and a TLS port (one server: a job submitted over TLS is seen on
// the plain port), Beanstalk on TLS only, the admin server over HTTPS.
func TestBinaryServesTLS(t *testing.T) {
	dir := t.TempDir()
	ca, tlsSection := tlsFiles(t, dir)
	file := writeFile(t, "tls.yaml", `
gearman:
  listen: "127.0.0.1:0"
  tls_listen: "127.0.0.1:0"
beanstalk:
  listen: ""
  tls_listen: "127.0.0.1:0"
admin:
  listen: "127.0.0.1:0"
  tls: true
data:
  dir: `+fmt.Sprintf("%q", dir)+"\n"+tlsSection)
	p := startJobgate(t, 4, "-config", file)
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}

	gc, err := tls.Dial("tcp", p.addrs["gearman_tls"], conf)
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	gearmanEcho(t, gc, "hello over tls")
	// A background job submitted over TLS is queued in the server the
	// plain port serves.
	w := codec.NewWriter(gc)
	w.WritePacket(codec.Req, codec.SubmitJobBg, []byte("tls-fn"), nil, []byte("x"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if f, err := codec.NewReader(gc, codec.Limits{}).ReadFrame(); err != nil || f.Packet.Type != codec.JobCreated {
		t.Fatalf("SUBMIT_JOB_BG over TLS: %v %s", err, f.String())
	}
	plain, err := net.DialTimeout("tcp", p.addrs["gearman"], 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetDeadline(time.Now().Add(10 * time.Second))
	plain.Write([]byte("status\n"))
	status, _ := io.ReadAll(io.LimitReader(plain, int64(len("tls-fn\t1\t0\t0\n.\n"))))
	if !strings.HasPrefix(string(status), "tls-fn\t1\t0\t0\n") {
		t.Errorf("status on the plain port: %q", status)
	}

	bc, err := tls.Dial("tcp", p.addrs["beanstalk_tls"], conf)
	if err != nil {
		t.Fatal(err)
	}
	bs := gobeanstalk.NewConn(bc)
	defer bs.Close()
	id, err := bs.Put([]byte("tls job"), 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if rid, body, err := bs.Reserve(0); err != nil || rid != id || !bytes.Equal(body, []byte("tls job")) {
		t.Fatalf("reserve over TLS: %d %q %v", rid, body, err)
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
	resp, err := client.Get("https://" + p.addrs["admin"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `jobgate_commands_total{command="put",protocol="beanstalk",result="ok"} 1`) {
		t.Errorf("GET https /metrics: %d %.300q", resp.StatusCode, body)
	}
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + p.addrs["admin"] + "/healthz"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS admin server answered %q", b)
		}
	}
	stopJobgate(t, p)
}

// TestBinaryGatewayUpstreamTLS runs two binaries: A serves Gearman over
// TLS; B is a gateway whose only backend is A's TLS port (backends[].tls
// with the CA). A job submitted to B's plain port reaches a worker on A's
// plain port through TLS, and the result comes back.
func TestBinaryGatewayUpstreamTLS(t *testing.T) {
	dir := t.TempDir()
	ca, tlsSection := tlsFiles(t, dir)
	a := startJobgate(t, 2, "-config", writeFile(t, "a.yaml", `
gearman:
  listen: "127.0.0.1:0"
  tls_listen: "127.0.0.1:0"
beanstalk:
  listen: ""
admin:
  listen: ""
data:
  dir: ""
`+tlsSection))
	caFile := testutil.WriteFile(t, dir, "ca.pem", ca.PEM)
	b := startJobgate(t, 1, "-config", writeFile(t, "b.yaml", fmt.Sprintf(`
gearman:
  listen: "127.0.0.1:0"
beanstalk:
  listen: ""
admin:
  listen: ""
data:
  dir: ""
backends:
  - name: a
    id: 1
    type: gearman
    address: %q
    tls:
      enabled: true
      ca_file: %q
routes:
  gearman_default: a
`, a.addrs["gearman_tls"], caFile)))

	dial := func(addr string) (net.Conn, *codec.Reader, *codec.Writer) {
		nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		return nc, codec.NewReader(nc, codec.Limits{}), codec.NewWriter(nc)
	}
	next := func(r *codec.Reader, want codec.Type) codec.Packet {
		t.Helper()
		f, err := r.ReadFrame()
		if err != nil || f.Packet.Type != want {
			t.Fatalf("want %v: %v %s", want, err, f.String())
		}
		return f.Packet
	}
	_, wr, ww := dial(a.addrs["gearman"])
	ww.WritePacket(codec.Req, codec.CanDo, []byte("upper"))
	ww.Flush()
	_, cr, cw := dial(b.addrs["gearman"])
	cw.WritePacket(codec.Req, codec.SubmitJob, []byte("upper"), nil, []byte("through tls"))
	cw.Flush()
	next(cr, codec.JobCreated)
	ww.WritePacket(codec.Req, codec.GrabJob)
	ww.Flush()
	job := next(wr, codec.JobAssign)
	handle := string(job.Handle())
	if string(job.Data()) != "through tls" {
		t.Fatalf("worker got %q", job.Data())
	}
	ww.WritePacket(codec.Req, codec.WorkComplete, []byte(handle), []byte("THROUGH TLS"))
	ww.Flush()
	if done := next(cr, codec.WorkComplete); string(done.Data()) != "THROUGH TLS" {
		t.Fatalf("client got %q", done.Data())
	}
	stopJobgate(t, b)
	stopJobgate(t, a)
}

// TestRunTLSConfigErrors: a TLS listener without certificates, or with a
// certificate file that cannot be read, fails the start with a message
// naming the problem.
func TestRunTLSConfigErrors(t *testing.T) {
	noCert := writeFile(t, "nocert.yaml", "gearman:\n  listen: \"\"\n  tls_listen: \"127.0.0.1:0\"\nbeanstalk:\n  listen: \"\"\nadmin:\n  listen: \"\"\n")
	missing := writeFile(t, "missing.yaml", "gearman:\n  listen: \"\"\n  tls_listen: \"127.0.0.1:0\"\nbeanstalk:\n  listen: \"\"\nadmin:\n  listen: \"\"\ndata:\n  dir: \"\"\n"+
		"tls:\n  certificates:\n    - cert_file: /nonexistent/cert.pem\n      key_file: /nonexistent/key.pem\n")
	for _, tc := range []struct {
		file string
		code int
		want string
	}{
		{noCert, 2, "gearman.tls_listen: TLS needs a certificate"},
		{missing, 1, "/nonexistent/cert.pem: no such file"},
	} {
		var stderr bytes.Buffer
		done := make(chan int, 1)
		go func() { done <- run([]string{"-config", tc.file}, io.Discard, &stderr) }()
		select {
		case code := <-done:
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("%s: exit %d, stderr %q; want exit %d with %q", tc.file, code, stderr.String(), tc.code, tc.want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: run did not return", tc.file) // it would be serving: the error was missed
		}
	}
}

// TestTLSGearmandExample runs examples/config/tls-gearmand.yaml as
// written, with only the placeholder paths and ports replaced: a real
// gearmand behind jobgate's TLS port, a real `gearman` CLI worker on
// gearmand's own port, and a Go client with a client certificate that gets
// its job done through jobgate. A client without a certificate is refused.
func TestTLSGearmandExample(t *testing.T) {
	var out, errs bytes.Buffer
	const example = "../../examples/config/tls-gearmand.yaml"
	if code := run([]string{"check-config", example}, &out, &errs); code != 0 {
		t.Fatalf("check-config: exit %d: %s", code, errs.String())
	}
	testutil.RequireBinary(t, "gearman")
	gearmand := testutil.StartGearmand(t)
	dir := t.TempDir()
	ca, clientCA := testutil.NewCA(t, "server CA"), testutil.NewCA(t, "client CA")
	c, k := ca.Issue(t, testutil.Leaf{CN: "gearman.example.com"})
	text, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer(
		"/etc/jobgate/tls/gearman.example.com.crt", testutil.WriteFile(t, dir, "cert.pem", c),
		"/etc/jobgate/tls/gearman.example.com.key", testutil.WriteFile(t, dir, "key.pem", k),
		"/etc/jobgate/tls/clients-ca.pem", testutil.WriteFile(t, dir, "clients.pem", clientCA.PEM),
		`":4731"`, `"127.0.0.1:0"`,
		`"127.0.0.1:9090"`, `"127.0.0.1:0"`,
		"127.0.0.1:4730", gearmand,
	).Replace(string(text))
	p := startJobgate(t, 2, "-config", writeFile(t, "example.yaml", cfg))

	host, port, _ := net.SplitHostPort(gearmand)
	worker := exec.Command("gearman", "-h", host, "-p", port, "-w", "-c", "1", "-f", "upper", "--", "tr", "a-z", "A-Z")
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	wdone := make(chan error, 1)
	go func() { wdone <- worker.Wait() }()
	t.Cleanup(func() {
		_ = worker.Process.Kill() // by PID; a no-op once it has exited
		<-wdone
	})

	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1",
		Certificates: []tls.Certificate{clientCA.IssueTLS(t, testutil.Leaf{CN: "app", Client: true})}}
	nc, err := tls.Dial("tcp", p.addrs["gearman_tls"], conf)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(15 * time.Second))
	w, r := codec.NewWriter(nc), codec.NewReader(nc, codec.Limits{})
	w.WritePacket(codec.Req, codec.SubmitJob, []byte("upper"), nil, []byte("legacy behind tls"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for the result: %v", err)
		}
		if f.Packet.Type == codec.WorkComplete {
			if string(f.Packet.Data()) != "LEGACY BEHIND TLS" {
				t.Fatalf("result %q", f.Packet.Data())
			}
			break
		}
	}

	conf.Certificates = nil
	anon, err := tls.Dial("tcp", p.addrs["gearman_tls"], conf)
	if err == nil {
		anon.SetDeadline(time.Now().Add(10 * time.Second))
		w := codec.NewWriter(anon)
		w.WritePacket(codec.Req, codec.EchoReq, []byte("let me in"))
		w.Flush()
		_, err = codec.NewReader(anon, codec.Limits{}).ReadFrame()
		anon.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("client without a certificate: %v, want refused", err)
	}
	stopJobgate(t, p)
}
