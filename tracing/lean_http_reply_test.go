package tracing

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/testutil"
)

// TestOTLPHTTPReplyTooLarge: a reply body over 4 MiB fails the upload
// with "response body too large", as with the OTLP client, instead of
// being read truncated; one of exactly 4 MiB is read.
func TestOTLPHTTPReplyTooLarge(t *testing.T) {
	clearHTTPEnv(t)
	var size atomic.Int64
	size.Store(maxHTTPResponse)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(bytes.Repeat([]byte{'x'}, int(size.Load())))
	}))
	defer srv.Close()
	s, err := newHTTPSink(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.uploadRequest(ctx, []byte{}, 0); err != nil {
		t.Fatalf("a reply of exactly the limit: %v", err)
	}
	size.Add(1)
	if err := s.uploadRequest(ctx, []byte{}, 0); err == nil || !strings.Contains(err.Error(), "response body too large") {
		t.Fatalf("a reply over the limit: %v", err)
	}
}

// TestOTLPHTTPClientCertLevels: the client certificate and its key come
// from the same level: the _TRACES_ pair when both are set, else the
// general pair; a _TRACES_ certificate without a _TRACES_ key is not
// paired with the general key.
func TestOTLPHTTPClientCertLevels(t *testing.T) {
	ca := testutil.NewCA(t, "otlp-ca")
	dir := t.TempDir()
	gCert, gKey := ca.Issue(t, testutil.Leaf{CN: "general", Client: true})
	tCert, tKey := ca.Issue(t, testutil.Leaf{CN: "traces", Client: true})
	files := map[string]string{
		"gc": testutil.WriteFile(t, dir, "g.pem", gCert), "gk": testutil.WriteFile(t, dir, "g.key", gKey),
		"tc": testutil.WriteFile(t, dir, "t.pem", tCert), "tk": testutil.WriteFile(t, dir, "t.key", tKey),
	}
	want := map[string]tls.Certificate{}
	for name, pair := range map[string][2][]byte{"general": {gCert, gKey}, "traces": {tCert, tKey}} {
		c, err := tls.X509KeyPair(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		want[name] = c
	}
	for _, tc := range []struct {
		name, tracesCert, tracesKey, want string
	}{
		{"traces certificate alone", files["tc"], "", "general"},
		{"traces key alone", "", files["tk"], "general"},
		{"traces pair", files["tc"], files["tk"], "traces"},
		{"general pair", "", "", "general"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearHTTPEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", files["gc"])
			t.Setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", files["gk"])
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", tc.tracesCert)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", tc.tracesKey)
			conf := otlpTLSConfig(func(err error) { t.Fatal(err) })
			if conf == nil || len(conf.Certificates) != 1 || !bytes.Equal(conf.Certificates[0].Certificate[0], want[tc.want].Certificate[0]) {
				t.Fatalf("not the %s certificate: %+v", tc.want, conf)
			}
		})
	}
}

// TestOTLPHTTPUnreadableTLSFiles: a CA file or client certificate that
// cannot be loaded is reported and left out, as the OTLP clients do, so
// tracing does not keep the server from starting.
func TestOTLPHTTPUnreadableTLSFiles(t *testing.T) {
	clearHTTPEnv(t)
	dir := t.TempDir()
	notPEM := testutil.WriteFile(t, dir, "junk.pem", []byte("not a certificate"))
	for _, tc := range []struct{ name, ca, cert, want string }{
		{"missing CA", dir + "/absent.pem", "", "no such file"},
		{"CA without PEM", notPEM, "", "no PEM certificate"},
		{"missing client pair", "", dir + "/absent.pem", "client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", tc.ca)
			t.Setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", tc.cert)
			t.Setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", tc.cert)
			var reported []error
			if conf := otlpTLSConfig(func(err error) { reported = append(reported, err) }); conf != nil {
				t.Errorf("TLS settings %+v from files that do not load", conf)
			}
			if len(reported) != 1 || !strings.Contains(reported[0].Error(), tc.want) {
				t.Fatalf("reported %v, want one error with %q", reported, tc.want)
			}
			if _, err := newHTTPSink("https://127.0.0.1:4318"); err != nil {
				t.Fatalf("the sink did not start: %v", err)
			}
		})
	}
}
