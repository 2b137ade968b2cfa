// Package admin is jobgate's admin HTTP server: liveness (/healthz),
// readiness (/readyz), Prometheus metrics (/metrics) and two operator
// actions (POST /-/reload, POST /-/drain).
//
// It knows nothing about listeners, journals or backends: the wiring
// registers readiness checks (AddCheck, often a Flag it sets once a step
// is done) and injects the metrics handler and the action functions, so
// the package is testable alone and the dependency arrows stay pointing
// down.
package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/proxy/connlimit"
)

// CheckFunc is a readiness check: nil when ready, an error saying what is
// missing otherwise. It gets a context bounded by Options.CheckTimeout and
// may be called concurrently, once per /readyz request.
type CheckFunc func(ctx context.Context) error

// Options configures New. Every field is optional.
type Options struct {
	// Metrics serves /metrics, e.g. metrics.Metrics.Handler(). Nil: 404.
	Metrics http.Handler
	// Reload is called by POST /-/reload to re-read the configuration. It
	// returns once the new configuration is in force or has been refused;
	// its error (e.g. every validation error) is the body of a 422
	// response: the request was understood, the configuration it names is
	// not acceptable, and the old one keeps running.
	// Nil: 501.
	Reload func(ctx context.Context) error
	// Drain is called by POST /-/drain to stop taking new work (Beanstalk
	// DRAINING, no new Gearman submissions) while jobs in hand finish. It
	// should start the drain and return, not wait for the last job: the
	// HTTP request is bounded by the server's write timeout. /readyz fails
	// from the moment the request arrives, so a load balancer stops sending
	// clients. Nil: 501.
	Drain func(ctx context.Context) error
	// TLSConfig, if not nil, serves HTTPS with it (from proxy/tlsconf, so
	// certificates reload and client-certificate policy applies). It must
	// provide certificates (Certificates, GetCertificate or
	// GetConfigForClient).
	TLSConfig *tls.Config
	// Logger logs actions and HTTP server errors. Default slog.Default().
	Logger *slog.Logger
	// CheckTimeout bounds each readiness check. Default 2s.
	CheckTimeout time.Duration
	// MaxConnections caps concurrent connections, counted from accept,
	// before any TLS handshake; past it a new connection is closed at
	// once. 0 means no cap.
	MaxConnections int
}

// Server is the admin HTTP server. Its methods are safe for concurrent use.
type Server struct {
	opts     Options
	handler  http.Handler
	srv      *http.Server
	draining atomic.Bool

	mu     sync.Mutex // guards checks
	checks []namedCheck
}

type namedCheck struct {
	name string
	f    CheckFunc
}

// New returns a server; Serve starts it.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 2 * time.Second
	}
	s := &Server{opts: opts}

	mux := http.NewServeMux()
	// "GET /x" also matches HEAD; other methods get 405 with an Allow
	// header from the mux.
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", opts.Metrics)
	}
	// The actions change state, so they are POST only and refuse
	// cross-origin browser requests: the listener is usually on
	// 127.0.0.1, which any web page the operator opens can otherwise post
	// a form to.
	csrf := http.NewCrossOriginProtection()
	mux.Handle("POST /-/reload", csrf.Handler(http.HandlerFunc(s.reload)))
	mux.Handle("POST /-/drain", csrf.Handler(http.HandlerFunc(s.drain)))
	s.handler = mux

	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	if opts.TLSConfig != nil {
		s.srv.TLSConfig = opts.TLSConfig.Clone()
	}
	return s
}

// AddCheck registers a readiness check under name, which /readyz reports
// when it fails. The wiring registers, for example, "listeners" (a Flag set
// once every listener is bound), "journal" (a Flag set once replay is
// done) and "backends" (a check that every route has a backend up).
func (s *Server) AddCheck(name string, f CheckFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, namedCheck{name, f})
}

// Handler returns the server's routes, for tests and for mounting
// elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// Draining reports whether POST /-/drain has been called.
func (s *Server) Draining() bool { return s.draining.Load() }

// Serve serves on l until Shutdown, over TLS when Options.TLSConfig is
// set. It returns nil after Shutdown and the error that stopped it
// otherwise. l is closed when Serve returns.
func (s *Server) Serve(l net.Listener) error {
	if s.opts.MaxConnections > 0 {
		l = connlimit.NewListener(l, connlimit.Options{MaxConns: s.opts.MaxConnections})
	}
	var err error
	if s.srv.TLSConfig != nil {
		err = s.srv.ServeTLS(l, "", "")
	} else {
		err = s.srv.Serve(l)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server gracefully: it closes the listener, lets
// requests in progress finish until ctx is done, then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, "jobgate admin\n\nGET  /healthz\nGET  /readyz\nGET  /metrics\nPOST /-/reload\nPOST /-/drain\n")
}

// healthz answers 200 whenever the process can answer at all: liveness is
// "not wedged", and anything more would get a live process restarted for a
// dead backend.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	plain(w, http.StatusOK, "ok\n")
}

// readyz runs every check concurrently (a slow backend check must not
// delay the others past the timeout) and answers 200 "ok" when all pass,
// 503 with one "name: error" line per failing check otherwise, in
// registration order. ?verbose lists the passing checks too.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	checks := append([]namedCheck(nil), s.checks...)
	s.mu.Unlock()

	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.CheckTimeout)
			defer cancel()
			errs[i] = runCheck(ctx, c.f)
		})
	}
	wg.Wait()

	var b strings.Builder
	failed := false
	if s.draining.Load() {
		failed = true
		b.WriteString("draining: drain requested\n")
	}
	_, verbose := r.URL.Query()["verbose"]
	for i, c := range checks {
		if errs[i] != nil {
			failed = true
			fmt.Fprintf(&b, "%s: %s\n", c.name, oneLine(errs[i].Error()))
		} else if verbose {
			fmt.Fprintf(&b, "%s: ok\n", c.name)
		}
	}
	if failed {
		plain(w, http.StatusServiceUnavailable, b.String())
		return
	}
	plain(w, http.StatusOK, b.String()+"ok\n")
}

// runCheck runs f, turning a panic into a failure so one bad check cannot
// take the admin server down, and a check that ignores ctx into a timeout.
func runCheck(ctx context.Context, f CheckFunc) (err error) {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("check panicked: %v", p)
			}
		}()
		done <- f(ctx)
	}()
	select {
	case err = <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("check timed out: %w", ctx.Err())
	}
}

// oneLine keeps a check's error on its line of the /readyz body.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if s.opts.Reload == nil {
		plain(w, http.StatusNotImplemented, "reload is not available\n")
		return
	}
	if err := s.opts.Reload(r.Context()); err != nil {
		s.opts.Logger.Warn("admin: reload refused", "error", err)
		plain(w, http.StatusUnprocessableEntity, "reload failed:\n"+err.Error()+"\n")
		return
	}
	s.opts.Logger.Info("admin: configuration reloaded")
	plain(w, http.StatusOK, "reloaded\n")
}

func (s *Server) drain(w http.ResponseWriter, r *http.Request) {
	if s.opts.Drain == nil {
		plain(w, http.StatusNotImplemented, "drain is not available\n")
		return
	}
	// Not ready from now on, even if Drain fails: the operator asked for
	// traffic to go elsewhere.
	s.draining.Store(true)
	if err := s.opts.Drain(r.Context()); err != nil {
		s.opts.Logger.Warn("admin: drain failed", "error", err)
		plain(w, http.StatusInternalServerError, "drain failed:\n"+err.Error()+"\n")
		return
	}
	s.opts.Logger.Info("admin: draining")
	plain(w, http.StatusOK, "draining\n")
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprint(w, body)
}

// Flag is a readiness condition the wiring sets once a step is done
// ("listeners bound", "journal replayed") and may clear again. The zero
// value is not ready.
type Flag struct {
	ready atomic.Bool
	what  string
}

// NewFlag returns an unset flag whose check fails with "not yet: " + what.
func NewFlag(what string) *Flag { return &Flag{what: what} }

// Set marks the condition met (true) or not (false).
func (f *Flag) Set(ready bool) { f.ready.Store(ready) }

// Ready reports whether the flag is set.
func (f *Flag) Ready() bool { return f.ready.Load() }

// Check is the flag as a CheckFunc.
func (f *Flag) Check(context.Context) error {
	if f.ready.Load() {
		return nil
	}
	if f.what == "" {
		return errors.New("not yet")
	}
	return errors.New("not yet: " + f.what)
}
