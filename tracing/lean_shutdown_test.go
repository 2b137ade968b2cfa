package tracing

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestShutdownCancelsUpload: an upload in progress when Shutdown is called
// (here one the receiver never answers) is canceled when Shutdown's
// context ends, as with the OTLP client, rather than running on for the
// export timeout; its spans count as failed and the export goroutine ends.
func TestShutdownCancelsUpload(t *testing.T) {
	clearHTTPEnv(t)
	// Long enough that only the cancellation can end the upload in time.
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "600000")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "600000")
	entered := make(chan struct{}, 1)
	canceled := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read it all: only then does the server notice the client
		// leaving (r.Context).
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
			canceled <- struct{}{}
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	p, err := New(context.Background(), Config{Enabled: true, Endpoint: srv.URL, ServiceName: "shutdown-test"})
	if err != nil {
		t.Fatal(err)
	}
	traceJob(p.Tracer(Gearman))
	// Start the upload with a flush that does not wait for it.
	fctx, fcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_ = p.ForceFlush(fctx)
	fcancel()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the upload did not reach the receiver")
	}
	sctx, scancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer scancel()
	if err := p.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want its deadline", err)
	}
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upload in progress was not canceled when Shutdown's context ended")
	}
	select {
	case <-p.lean.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the export goroutine did not end")
	}
	if n := p.ExportFailed(); n != 3 {
		t.Fatalf("%d spans failed, want 3", n)
	}
}
