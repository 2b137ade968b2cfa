package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an OTLP receiver started by a test: it keeps every span it
// is sent, with its service name.
type otlpSink struct {
	collectortrace.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []*tracepb.Span
	service map[string]bool
}

func (s *otlpSink) add(r *collectortrace.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range r.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				s.service[kv.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			s.spans = append(s.spans, ss.GetSpans()...)
		}
	}
}

// Export is the OTLP/gRPC trace service.
func (s *otlpSink) Export(_ context.Context, r *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.add(r)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is the OTLP/HTTP (protobuf) trace endpoint.
func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.add(&req)
	resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// startSink starts a receiver for protocol on loopback and returns its
// endpoint URL.
func startSink(t *testing.T, protocol string) (*otlpSink, string) {
	t.Helper()
	sink := &otlpSink{service: map[string]bool{}}
	if protocol == "grpc" {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(gs, sink)
		go func() { _ = gs.Serve(lis) }()
		t.Cleanup(gs.Stop)
		return sink, "http://" + lis.Addr().String()
	}
	hs := httptest.NewServer(sink)
	t.Cleanup(hs.Close)
	return sink, hs.URL
}

// clearOTELEnv blanks the OTEL_* variables (empty counts as unset) so the
// developer's environment cannot leak into the child process.
func clearOTELEnv(t *testing.T) {
	for _, v := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(v, "")
	}
}

// TestBinaryExportsTraces runs the binary with tracing on, exporting over
// OTLP gRPC and then OTLP/HTTP to a receiver in the test, runs a Gearman
// job with the gearman command-line client and worker and a Beanstalk job
// with go-beanstalk, stops the binary with SIGTERM (which flushes) and
// checks the spans that arrived.
func TestBinaryExportsTraces(t *testing.T) {
	if _, err := exec.LookPath("gearman"); err != nil {
		t.Fatal("the gearman command-line tool is required")
	}
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(protocol, "/", "_"), func(t *testing.T) {
			clearOTELEnv(t)
			sink, endpoint := startSink(t, protocol)
			conf := writeFile(t, "tracing.yaml", fmt.Sprintf(
				"tracing:\n  enabled: true\n  endpoint: %q\n  protocol: %q\n  service_name: jobgate-test\n  sampler: always_on\n",
				endpoint, protocol))
			p := startJobgate(t, 2, "-config", conf, "-gearman", "127.0.0.1:0", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", "")
			gearmanJob(t, p.addrs["gearman"])
			beanstalkJob(t, p.addrs["beanstalk"])
			stopJobgate(t, p)
			sink.mu.Lock()
			defer sink.mu.Unlock()
			if !sink.service["jobgate-test"] || len(sink.service) != 1 {
				t.Errorf("service names %v, want jobgate-test", sink.service)
			}
			tree := renderTraces(sink.spans)
			t.Logf("traces received:\n%s", tree)
			want := "" +
				"send upper (PRODUCER)\n" +
				"├── receive upper (CLIENT)\n" +
				"└── process upper (CONSUMER) outcome=completed\n" +
				"send emails (PRODUCER)\n" +
				"├── receive emails (CLIENT)\n" +
				"├── process emails (CONSUMER) outcome=released\n" +
				"├── receive emails (CLIENT)\n" +
				"└── process emails (CONSUMER) outcome=completed\n"
			if shape := renderShape(sink.spans); shape != want {
				t.Errorf("trace shape:\n%s\nwant:\n%s", shape, want)
			}
		})
	}
}

// gearmanJob runs one foreground job through the gearman command-line
// tool: a worker that upper-cases, and a client.
func gearmanJob(t *testing.T, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	worker := exec.CommandContext(ctx, "gearman", "-h", host, "-p", port, "-w", "-f", "upper", "-c", "1", "--", "tr", "a-z", "A-Z")
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := worker.Wait(); err != nil {
			t.Errorf("gearman worker: %v", err)
		}
	}()
	out, err := exec.CommandContext(ctx, "gearman", "-h", host, "-p", port, "-f", "upper", "hello").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "HELLO" {
		t.Fatalf("gearman client: %q %v", out, err)
	}
}

// beanstalkJob puts one job with go-beanstalk, reserves and releases it,
// then reserves, touches and deletes it.
func beanstalkJob(t *testing.T, addr string) {
	t.Helper()
	c, err := gobeanstalk.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tube := gobeanstalk.NewTube(c, "emails")
	if _, err := tube.Put([]byte("hi"), 1, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	ts := gobeanstalk.NewTubeSet(c, "emails")
	id, _, err := ts.Reserve(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The first attempt fails and puts the job back; the second finishes.
	if err := c.Release(id, 1, 0); err != nil {
		t.Fatal(err)
	}
	if id, _, err = ts.Reserve(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Touch(id); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(id); err != nil {
		t.Fatal(err)
	}
}

// spanTree orders spans into traces (by their root's start) and children
// (by start, then name), for rendering.
func spanTree(spans []*tracepb.Span) (roots []*tracepb.Span, children map[string][]*tracepb.Span) {
	children = map[string][]*tracepb.Span{}
	byID := map[string]bool{}
	for _, s := range spans {
		byID[string(s.GetSpanId())] = true
	}
	for _, s := range spans {
		if p := string(s.GetParentSpanId()); p != "" && byID[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	// By start time; a receive span starts when the worker asked, before
	// its process span, and ties (same clock reading) put receive first.
	order := func(a, b *tracepb.Span) int {
		if a.GetStartTimeUnixNano() != b.GetStartTimeUnixNano() {
			return cmp.Compare(a.GetStartTimeUnixNano(), b.GetStartTimeUnixNano())
		}
		return -strings.Compare(a.GetName(), b.GetName())
	}
	slices.SortFunc(roots, order)
	for _, c := range children {
		slices.SortFunc(c, order)
	}
	return roots, children
}

var kindNames = map[tracepb.Span_SpanKind]string{
	tracepb.Span_SPAN_KIND_PRODUCER: "PRODUCER", tracepb.Span_SPAN_KIND_CONSUMER: "CONSUMER",
	tracepb.Span_SPAN_KIND_CLIENT: "CLIENT", tracepb.Span_SPAN_KIND_SERVER: "SERVER",
	tracepb.Span_SPAN_KIND_INTERNAL: "INTERNAL",
}

// renderShape draws each trace as a tree of names, kinds and outcomes.
func renderShape(spans []*tracepb.Span) string {
	return render(spans, false)
}

// renderTraces draws each trace as a tree with timings and attributes,
// like Jaeger's trace view in text: examples/jaeger shows one.
func renderTraces(spans []*tracepb.Span) string {
	return render(spans, true)
}

func render(spans []*tracepb.Span, detail bool) string {
	roots, children := spanTree(spans)
	var b strings.Builder
	for _, r := range roots {
		t0 := r.GetStartTimeUnixNano()
		line := func(s *tracepb.Span, prefix string) {
			b.WriteString(prefix + s.GetName() + " (" + kindNames[s.GetKind()] + ")")
			attrs := map[string]string{}
			for _, kv := range s.GetAttributes() {
				v := kv.GetValue()
				switch {
				case v.GetStringValue() != "":
					attrs[kv.GetKey()] = v.GetStringValue()
				default:
					attrs[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
				}
			}
			if o, ok := attrs["jobgate.job.outcome"]; ok {
				b.WriteString(" outcome=" + o)
			}
			if detail {
				fmt.Fprintf(&b, "  +%s %s", time.Duration(s.GetStartTimeUnixNano()-t0).Round(time.Microsecond),
					time.Duration(s.GetEndTimeUnixNano()-s.GetStartTimeUnixNano()).Round(time.Microsecond))
				keys := make([]string, 0, len(attrs))
				for k := range attrs {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					if k == "jobgate.job.outcome" {
						continue
					}
					b.WriteString("\n" + strings.Repeat(" ", len([]rune(prefix))+4) + k + "=" + attrs[k])
				}
				for _, e := range s.GetEvents() {
					b.WriteString("\n" + strings.Repeat(" ", len([]rune(prefix))+4) + "event " + e.GetName())
				}
			}
			b.WriteString("\n")
		}
		line(r, "")
		kids := children[string(r.GetSpanId())]
		for i, c := range kids {
			prefix := "├── "
			if i == len(kids)-1 {
				prefix = "└── "
			}
			line(c, prefix)
		}
	}
	return b.String()
}
