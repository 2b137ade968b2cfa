package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/jobgate/jobgate/internal/testutil/cputime"
)

// gearmanBatch returns a full batch of ended lean spans as the Gearman
// server's foreground path makes them (send, receive and process per
// job, with the hooks' attributes and numeric ids), held in a queue that
// never exports them, and the encoder the Provider would use.
func gearmanBatch(tb testing.TB) ([]*leanSpan, leanEncoder) {
	const batch = 512 // the batch the benchmark's figures were first taken with
	tb.Helper()
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("jobgate"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res))
	rc, _ := Config{Sampler: SamplerAlwaysOn}.resolve(func(string) (string, bool) { return "", false })
	// No export goroutine, and the pipe keeps the ended records as they
	// are instead of encoding and recycling them.
	var spans []*leanSpan
	pipe := &leanPipe{capture: func(s *leanSpan) { spans = append(spans, s) }}
	tr := NewTracer(tp, Gearman, rc)
	tr.lean = &leanTracer{system: string(Gearman), sampler: newLeanSampler(rc), pipe: pipe}
	ctx := context.Background()
	for i := uint64(1); len(spans) < batch; i++ {
		start := time.Now()
		s := tr.StartSendBare(ctx, start)
		s.Describe(Message{Operation: "SUBMIT_JOB", Destination: "resize", ConversationID: "u-1234", BodySize: 100})
		cr := s.Creation()
		s.CreatedNum("H:bench.example:", 1000+i)
		m := Message{Operation: "JOB_ASSIGN", Destination: "resize", IDPrefix: "H:bench.example:", IDNum: 1000 + i,
			ConversationID: "u-1234", BodySize: 100, Enqueued: start, Attempt: 1, Start: time.Now()}
		p := tr.Deliver(cr, m)
		p.Complete()
	}
	return spans[:batch], newLeanEncoder(res, leanScope)
}

// BenchmarkLeanEncode measures encoding one batch of 512 Gearman job
// spans; ns/span and B/span are per span. "hot" encodes the same batch
// again and again, its records in the cache, as spans are now encoded
// when they end; "cold" takes turns over batches whose records (about
// 16 MB in all) do not fit in it, as records were found when they were
// encoded a whole batch at a time.
func BenchmarkLeanEncode(b *testing.B) {
	for _, c := range []struct {
		name    string
		batches int
	}{{"hot", 1}, {"cold", 64}} {
		b.Run(c.name, func(b *testing.B) {
			var batches [][]*leanSpan
			var enc leanEncoder
			for range c.batches {
				var spans []*leanSpan
				spans, enc = gearmanBatch(b)
				batches = append(batches, spans)
			}
			body := enc.encode(batches[0])
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				enc.encode(batches[i%len(batches)])
				_ = enc.request()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batches[0])), "ns/span")
			b.ReportMetric(float64(len(body))/float64(len(batches[0])), "B/span")
		})
	}
}

// BenchmarkLeanExportBatch measures the export goroutine's whole work
// for one batch of 512 Gearman job spans: the encoding and the OTLP/HTTP
// post to a receiver on loopback that reads and drops the body (the
// receiver's CPU is in the process's too: cpu-ns/span counts it). The
// spans are not recycled, so the same batch is posted each time.
func BenchmarkLeanExportBatch(b *testing.B) {
	resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	defer srv.Close()
	clearEnv(b)
	sink, err := newHTTPSink(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.stop(context.Background())
	spans, enc := gearmanBatch(b)
	ctx := context.Background()
	b.ReportAllocs()
	start := cputime.Process()
	b.ResetTimer()
	for range b.N {
		enc.encode(spans)
		if err := sink.uploadRequest(ctx, enc.request(), len(spans)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	n := float64(b.N * len(spans))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/span")
	b.ReportMetric(float64(cputime.Process()-start)/n, "cpu-ns/span")
}
