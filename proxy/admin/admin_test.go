package admin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
	"github.com/jobgate/jobgate/internal/testutil"
	"github.com/jobgate/jobgate/metrics"
)

var quiet = slog.New(slog.DiscardHandler)

// do runs one request against h and returns status and body.
func do(t *testing.T, h http.Handler, method, target string, hdr ...string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func expect(t *testing.T, h http.Handler, method, target string, wantCode int, wantBody string, hdr ...string) {
	t.Helper()
	code, body := do(t, h, method, target, hdr...)
	if code != wantCode || body != wantBody {
		t.Errorf("%s %s = %d %q, want %d %q", method, target, code, body, wantCode, wantBody)
	}
}

func TestHealthz(t *testing.T) {
	h := New(Options{Logger: quiet}).Handler()
	expect(t, h, "GET", "/healthz", 200, "ok\n")
	expect(t, h, "HEAD", "/healthz", 200, "ok\n") // the recorder keeps the body a real server drops
	if code, _ := do(t, h, "POST", "/healthz"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d, want 405", code)
	}
	if code, _ := do(t, h, "GET", "/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404", code)
	}
	if code, _ := do(t, h, "GET", "/metrics"); code != http.StatusNotFound {
		t.Errorf("GET /metrics without a handler = %d, want 404", code)
	}
}

// TestReadyzFlips walks readiness through startup: nothing bound, then the
// listeners, then the journal, then a backend going down and up.
func TestReadyzFlips(t *testing.T) {
	s := New(Options{Logger: quiet})
	h := s.Handler()
	expect(t, h, "GET", "/readyz", 200, "ok\n") // no checks: ready

	listeners := NewFlag("listeners bound")
	journal := NewFlag("journal replayed")
	var backendErr atomic.Pointer[error]
	s.AddCheck("listeners", listeners.Check)
	s.AddCheck("journal", journal.Check)
	s.AddCheck("backends", func(context.Context) error {
		if p := backendErr.Load(); p != nil {
			return *p
		}
		return nil
	})

	expect(t, h, "GET", "/readyz", 503, "listeners: not yet: listeners bound\njournal: not yet: journal replayed\n")
	listeners.Set(true)
	expect(t, h, "GET", "/readyz", 503, "journal: not yet: journal replayed\n")
	journal.Set(true)
	expect(t, h, "GET", "/readyz", 200, "ok\n")
	expect(t, h, "GET", "/readyz?verbose", 200, "listeners: ok\njournal: ok\nbackends: ok\nok\n")

	down := errors.New("route beanstalk \"mail-*\": no backend up\n(gm1 down, gm2 breaker open)")
	backendErr.Store(&down)
	expect(t, h, "GET", "/readyz", 503, "backends: route beanstalk \"mail-*\": no backend up; (gm1 down, gm2 breaker open)\n")
	expect(t, h, "GET", "/readyz?verbose", 503, "listeners: ok\njournal: ok\nbackends: route beanstalk \"mail-*\": no backend up; (gm1 down, gm2 breaker open)\n")
	backendErr.Store(nil)
	expect(t, h, "GET", "/readyz", 200, "ok\n")
	listeners.Set(false) // e.g. a listener lost on reload
	expect(t, h, "GET", "/readyz", 503, "listeners: not yet: listeners bound\n")
}

func TestReadyzBadChecks(t *testing.T) {
	s := New(Options{Logger: quiet, CheckTimeout: 20 * time.Millisecond})
	block := make(chan struct{})
	defer close(block)
	s.AddCheck("panics", func(context.Context) error { panic("boom") })
	s.AddCheck("ignores-ctx", func(context.Context) error { <-block; return nil })
	s.AddCheck("honours-ctx", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	s.AddCheck("zero-flag", (&Flag{}).Check)
	code, body := do(t, s.Handler(), "GET", "/readyz")
	// honours-ctx returns ctx.Err() just as runCheck sees the deadline:
	// either wording may win.
	want1 := "panics: check panicked: boom\n" +
		"ignores-ctx: check timed out: context deadline exceeded\n" +
		"honours-ctx: context deadline exceeded\n" +
		"zero-flag: not yet\n"
	want2 := strings.Replace(want1, "honours-ctx: ", "honours-ctx: check timed out: ", 1)
	if code != 503 || (body != want1 && body != want2) {
		t.Errorf("GET /readyz = %d %q, want 503 %q", code, body, want1)
	}
}

func TestReloadAndDrain(t *testing.T) {
	var reloads, drains atomic.Int32
	var reloadErr atomic.Pointer[error]
	s := New(Options{Logger: quiet,
		Reload: func(context.Context) error {
			reloads.Add(1)
			if p := reloadErr.Load(); p != nil {
				return *p
			}
			return nil
		},
		Drain: func(context.Context) error { drains.Add(1); return nil },
	})
	h := s.Handler()

	expect(t, h, "POST", "/-/reload", 200, "reloaded\n")
	bad := errors.New("config.yaml:3: backends[0].address: missing\nconfig.yaml:9: routes: unknown pool \"x\"")
	reloadErr.Store(&bad)
	expect(t, h, "POST", "/-/reload", 422, "reload failed:\n"+bad.Error()+"\n")
	if code, _ := do(t, h, "GET", "/-/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload = %d, want 405", code)
	}
	// A web page the operator has open must not be able to post here.
	if code, _ := do(t, h, "POST", "/-/reload", "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Errorf("cross-site POST /-/reload = %d, want 403", code)
	}
	if code, _ := do(t, h, "POST", "/-/drain", "Origin", "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("cross-origin POST /-/drain = %d, want 403", code)
	}
	if n := reloads.Load(); n != 2 {
		t.Errorf("Reload called %d times, want 2", n)
	}
	if n := drains.Load(); n != 0 {
		t.Errorf("Drain called %d times by refused requests", n)
	}

	expect(t, h, "GET", "/readyz", 200, "ok\n")
	expect(t, h, "POST", "/-/drain", 200, "draining\n")
	if !s.Draining() || drains.Load() != 1 {
		t.Errorf("Draining %v, Drain calls %d", s.Draining(), drains.Load())
	}
	expect(t, h, "GET", "/readyz", 503, "draining: drain requested\n")
	expect(t, h, "GET", "/healthz", 200, "ok\n") // still alive while draining
}

func TestActionsNotConfigured(t *testing.T) {
	s := New(Options{Logger: quiet})
	expect(t, s.Handler(), "POST", "/-/reload", 501, "reload is not available\n")
	expect(t, s.Handler(), "POST", "/-/drain", 501, "drain is not available\n")
	if s.Draining() {
		t.Error("draining without a Drain func")
	}
}

func TestDrainFailureStillNotReady(t *testing.T) {
	s := New(Options{Logger: quiet, Drain: func(context.Context) error { return errors.New("engine: already stopped") }})
	expect(t, s.Handler(), "POST", "/-/drain", 500, "drain failed:\nengine: already stopped\n")
	expect(t, s.Handler(), "GET", "/readyz", 503, "draining: drain requested\n")
}

// TestServeMetrics serves a real listener and checks exact lines of the
// exposition after scripted events.
func TestServeMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{Version: "v-test", NoRuntimeCollectors: true})
	m.Commands.Beanstalk(bscodec.Put, metrics.ResultOK)
	m.Commands.Beanstalk(bscodec.Put, metrics.ResultOK)
	m.Job(metrics.Beanstalk, "emails").Submitted()
	m.Backend("gm1").SetUp(false)

	s := New(Options{Logger: quiet, Metrics: m.Handler()})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()

	resp, err := http.Get("http://" + l.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(body), "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		`# TYPE jobgate_commands_total counter`,
		`jobgate_commands_total{command="put",protocol="beanstalk",result="ok"} 2`,
		`jobgate_jobs_submitted_total{name="emails",protocol="beanstalk"} 1`,
		`jobgate_backend_up{backend="gm1"} 0`,
		`jobgate_build_info{version="v-test"} 1`,
		`jobgate_connections{protocol="gearman"} 0`,
	} {
		if !lines[want] {
			t.Errorf("exposition lacks %q", want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

func TestServeTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	s := New(Options{Logger: quiet, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	defer func() {
		s.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + l.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" || resp.TLS == nil {
		t.Errorf("GET /healthz over TLS = %d %q (TLS %v)", resp.StatusCode, body, resp.TLS != nil)
	}
	// Plain HTTP to the TLS port is refused.
	if resp, err := http.Get("http://" + l.Addr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP served on the TLS listener")
		}
	}
}

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	return testutil.SelfSigned(t, "jobgate admin test")
}
