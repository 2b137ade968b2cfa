package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/jobgate/jobgate/internal/testutil"
)

// otlpHTTPVars are the variables the OTLP/HTTP sender reads beyond
// otelVars; the tests blank them too.
var otlpHTTPVars = []string{
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
}

// clearHTTPEnv blanks every variable the sender reads (empty counts as
// unset).
func clearHTTPEnv(t *testing.T) {
	t.Helper()
	clearEnv(t)
	for _, v := range otlpHTTPVars {
		t.Setenv(v, "")
	}
}

// receiver is a loopback OTLP/HTTP receiver; reply chooses each answer
// (nil: 200 with an empty response).
type receiver struct {
	mu      sync.Mutex
	reqs    []*http.Request
	spans   int
	reply   func(n int, w http.ResponseWriter, r *http.Request) bool
	lastErr error
}

// got returns the requests so far, the spans decoded and the last
// decoding error.
func (rc *receiver) got() ([]*http.Request, int, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*http.Request(nil), rc.reqs...), rc.spans, rc.lastErr
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	n := len(rc.reqs)
	rc.reqs = append(rc.reqs, r)
	rc.mu.Unlock()
	if rc.reply != nil && rc.reply(n, w, r) {
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.lastErr = err
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			rc.spans += len(ss.GetSpans())
		}
	}
	resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// exportJob traces one job (three spans) through a Provider exporting to
// endpoint, shuts it down (which flushes) and returns the spans that
// failed to export. retry, when set, replaces the sender's policy.
func exportJob(t *testing.T, endpoint string, retry *httpRetry) uint64 {
	t.Helper()
	p, err := New(context.Background(), Config{Enabled: true, Endpoint: endpoint, ServiceName: "otlp-test"})
	if err != nil {
		t.Fatal(err)
	}
	if retry != nil {
		p.lean.sink.(*httpSink).retry = *retry
	}
	traceJob(p.Tracer(Gearman))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return p.ExportFailed()
}

// TestOTLPHTTPHeadersAndGzip: the sender posts protobuf to the endpoint's
// path with the OTLP client's User-Agent, the headers of
// OTEL_EXPORTER_OTLP_TRACES_HEADERS (which replace the general ones, values
// percent-decoded), and gzip with OTEL_EXPORTER_OTLP_COMPRESSION=gzip.
func TestOTLPHTTPHeadersAndGzip(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "gzip"}[gz], func(t *testing.T) {
			clearHTTPEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "general=1")
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=s%20ecret, tenant = blue ,bad")
			if gz {
				t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
			}
			rc := &receiver{}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			failed := exportJob(t, srv.URL, nil)
			reqs, spans, err := rc.got()
			if failed != 0 || spans != 3 {
				t.Fatalf("%d spans received, %d failed (%v)", spans, failed, err)
			}
			r := reqs[0]
			checks := map[string]string{
				"path": r.URL.Path, "content-type": r.Header.Get("Content-Type"),
				"api-key": r.Header.Get("Api-Key"), "tenant": r.Header.Get("Tenant"), "general": r.Header.Get("General"),
				"encoding": r.Header.Get("Content-Encoding"),
			}
			want := map[string]string{
				"path": "/v1/traces", "content-type": "application/x-protobuf",
				"api-key": "s ecret", "tenant": "blue", "general": "", "encoding": map[bool]string{true: "gzip"}[gz],
			}
			for k, v := range want {
				if checks[k] != v {
					t.Errorf("%s: %q, want %q", k, checks[k], v)
				}
			}
			if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "OTel OTLP Exporter Go/") {
				t.Errorf("User-Agent %q", ua)
			}
		})
	}
}

// TestOTLPHTTPTLS: an https endpoint is verified against
// OTEL_EXPORTER_OTLP_CERTIFICATE and presents the client certificate of
// _CLIENT_CERTIFICATE/_CLIENT_KEY; without the CA the export fails; TLS
// files with an http endpoint are an error, as with the OTLP client.
func TestOTLPHTTPTLS(t *testing.T) {
	ca := testutil.NewCA(t, "otlp-ca")
	dir := t.TempDir()
	caFile := testutil.WriteFile(t, dir, "ca.pem", ca.PEM)
	certPEM, keyPEM := ca.Issue(t, testutil.Leaf{CN: "jobgate", Client: true})
	certFile := testutil.WriteFile(t, dir, "client.pem", certPEM)
	keyFile := testutil.WriteFile(t, dir, "client.key", keyPEM)

	rc := &receiver{}
	srv := httptest.NewUnstartedServer(rc)
	srv.TLS = ca.MutualTLS(t)
	srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	srv.StartTLS()
	defer srv.Close()

	clearHTTPEnv(t)
	if failed := exportJob(t, srv.URL, nil); failed != 3 {
		t.Fatalf("without the CA: %d failed, want 3", failed)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", caFile)
	t.Setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", certFile)
	t.Setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", keyFile)
	failed := exportJob(t, srv.URL, nil)
	if _, spans, err := rc.got(); failed != 0 || spans != 3 {
		t.Fatalf("with the CA: %d spans received, %d failed (%v)", spans, failed, err)
	}
	if _, err := New(context.Background(), Config{Enabled: true, Endpoint: "http://127.0.0.1:1"}); err == nil ||
		!strings.Contains(err.Error(), "insecure HTTP endpoint cannot use TLS") {
		t.Fatalf("TLS files with an http endpoint: %v", err)
	}
}

// TestOTLPHTTPRetry: 503 (with Retry-After) and 429 are retried until the
// receiver takes the batch; 400 is not retried and the spans count as
// failed; a partial success counts the spans it rejected as failed.
func TestOTLPHTTPRetry(t *testing.T) {
	clearHTTPEnv(t)
	fast := &httpRetry{initial: time.Millisecond, max: 2 * time.Millisecond, elapsed: 5 * time.Second}
	for _, tc := range []struct {
		name     string
		reply    func(n int, w http.ResponseWriter, r *http.Request) bool
		requests int
		failed   uint64
	}{
		{"unavailable", func(n int, w http.ResponseWriter, _ *http.Request) bool {
			switch n {
			case 0:
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
			case 1:
				w.WriteHeader(http.StatusTooManyRequests)
			default:
				return false
			}
			return true
		}, 3, 0},
		{"bad request", func(_ int, w http.ResponseWriter, _ *http.Request) bool {
			http.Error(w, "no", http.StatusBadRequest)
			return true
		}, 1, 3},
		{"partial success", func(_ int, w http.ResponseWriter, _ *http.Request) bool {
			resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{
				PartialSuccess: &collectortrace.ExportTracePartialSuccess{RejectedSpans: 2, ErrorMessage: "full"},
			})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(resp)
			return true
		}, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &receiver{reply: tc.reply}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			failed := exportJob(t, srv.URL, fast)
			if reqs, _, _ := rc.got(); len(reqs) != tc.requests || failed != tc.failed {
				t.Fatalf("%d requests, %d spans failed; want %d and %d", len(reqs), failed, tc.requests, tc.failed)
			}
		})
	}
}

// TestOTLPHTTPTimeout: OTEL_EXPORTER_OTLP_TIMEOUT bounds each attempt; a
// receiver that never answers fails the export once the retries would
// pass their limit, without hanging the shutdown.
func TestOTLPHTTPTimeout(t *testing.T) {
	clearHTTPEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "50")
	hang := make(chan struct{})
	rc := &receiver{reply: func(_ int, _ http.ResponseWriter, r *http.Request) bool {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
		return true
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(hang)
	begin := time.Now()
	failed := exportJob(t, srv.URL, &httpRetry{initial: 10 * time.Millisecond, max: 10 * time.Millisecond, elapsed: 2 * time.Second})
	if reqs, _, _ := rc.got(); failed != 3 || len(reqs) < 2 {
		t.Fatalf("%d spans failed after %d attempts, want 3 after at least 2", failed, len(reqs))
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Fatalf("export took %v", d)
	}
}

// TestOTLPHTTPFraming: the request the export goroutine posts (framed in
// place by leanEncoder.request) and the one upload frames by copying are
// the same bytes, and decode as an ExportTraceServiceRequest.
func TestOTLPHTTPFraming(t *testing.T) {
	clearHTTPEnv(t)
	enc := newLeanEncoder(nil, leanScope)
	for _, size := range []int{0, 200, 20000} {
		s := newTestSpan(size)
		body := append([]byte(nil), enc.encode([]*leanSpan{s})...)
		inPlace := enc.request()
		copied := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), body)
		if !bytes.Equal(inPlace, copied) {
			t.Fatalf("size %d: request framed in place differs from the copy", size)
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(inPlace, &req); err != nil || len(req.GetResourceSpans()) != 1 {
			t.Fatalf("size %d: %v, %d resource spans", size, err, len(req.GetResourceSpans()))
		}
	}
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	hs, err := newHTTPSink(srv.URL + "/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.stop(context.Background())
	if err := hs.upload(context.Background(), enc.encode([]*leanSpan{newTestSpan(10)}), 1); err != nil {
		t.Fatal(err)
	}
	if reqs, spans, err := rc.got(); len(reqs) != 1 || spans != 1 || err != nil {
		t.Fatalf("%d requests, %d spans, %v", len(reqs), spans, err)
	}
}

// newTestSpan is an ended span record whose name carries size bytes.
func newTestSpan(size int) *leanSpan {
	s := &leanSpan{name: "process", nameDest: strings.Repeat("x", size), ended: true}
	s.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: newTraceID(), SpanID: newSpanID(), TraceFlags: trace.FlagsSampled})
	return s
}
