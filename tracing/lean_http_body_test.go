package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestOTLPHTTPBodyReleased: a receiver may answer before it has read the
// request (here 400 at once, for a large body), and net/http may go on
// sending the body after the reply. The sender reuses the body's buffer
// for the next batch, so an upload must not return while the transport
// still reads it: run under -race, the writes to the buffer after each
// upload race with the transport's reads otherwise. Both the net/http
// path ("client", taken behind a proxy) and the export goroutine's own
// connection ("direct").
func TestOTLPHTTPBodyReleased(t *testing.T) {
	for _, tc := range []struct {
		name          string
		gz, viaClient bool
	}{{"direct/plain", false, false}, {"direct/gzip", true, false}, {"client/plain", false, true}, {"client/gzip", true, true}} {
		gz := tc.gz
		t.Run(tc.name, func(t *testing.T) {
			clearHTTPEnv(t)
			if gz {
				t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "no", http.StatusBadRequest)
			}))
			defer srv.Close()
			s, err := newHTTPSink(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer s.stop(context.Background())
			if tc.viaClient {
				s.direct = nil
			}
			body := make([]byte, 1<<20)
			for i := range 3 {
				// Incompressible enough that gzip's output is large too.
				x := uint32(i + 1)
				for j := range body {
					x ^= x << 13
					x ^= x >> 17
					x ^= x << 5
					body[j] = byte(x)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := s.uploadRequest(ctx, body, 1)
				cancel()
				if err == nil {
					t.Fatal("a 400 reply was taken as success")
				}
			}
		})
	}
}
