package main

import (
	"bufio"
	"bytes"
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

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// sinkChildEnv makes the test binary run "jobgate-bench otlp-sink" on a
// free loopback port instead of the tests: the sink blocks in system calls
// the runtime cannot interrupt and turns the garbage collector off, so it
// runs in a process of its own, as it does in the benchmarks.
const sinkChildEnv = "JOBGATE_BENCH_SINK_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(sinkChildEnv) == "1" {
		os.Exit(runOTLPSink([]string{"-addr", "127.0.0.1:0"}, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// sinkProcess is an otlp-sink running in a child process.
type sinkProcess struct {
	addr   string
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	counts sinkCounts
	done   bool
}

// sinkCounts are the figures the sink prints when it stops.
type sinkCounts struct{ requests, bytes, spans, bad int64 }

// startSink starts a sink process and stops it when the test ends.
func startSink(t *testing.T) *sinkProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	// Under -race the child would otherwise wait a second when it exits.
	cmd.Env = append(os.Environ(), sinkChildEnv+"=1", "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &sinkProcess{cmd: cmd, lines: bufio.NewScanner(out)}
	t.Cleanup(func() { p.stop(t) })
	if !p.lines.Scan() {
		t.Fatalf("the sink printed nothing: %v", p.lines.Err())
	}
	var ok bool
	p.addr, ok = strings.CutPrefix(p.lines.Text(), "otlp-sink listening on ")
	if !ok {
		t.Fatalf("the sink printed %q", p.lines.Text())
	}
	return p
}

// stop sends SIGTERM, waits (at most 10 s) for the sink to exit and
// returns what it counted.
func (p *sinkProcess) stop(t *testing.T) sinkCounts {
	t.Helper()
	if p.done {
		return p.counts
	}
	p.done = true
	p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.AfterFunc(10*time.Second, func() { p.cmd.Process.Kill() })
	defer timer.Stop()
	var last string
	for p.lines.Scan() {
		last = p.lines.Text()
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("the sink: %v", err)
	}
	c := &p.counts
	if _, err := fmt.Sscanf(last, "otlp-sink requests=%d bytes=%d spans=%d bad=%d", &c.requests, &c.bytes, &c.spans, &c.bad); err != nil {
		t.Fatalf("the sink's last line %q: %v", last, err)
	}
	return p.counts
}

// dial connects to the sink, with a deadline for everything after, and
// closes the connection when the test ends (tests may close it sooner).
func (p *sinkProcess) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// postRequest is an HTTP/1.1 POST of body as OTLP exporters send it.
func postRequest(body []byte) string {
	return fmt.Sprintf("POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// exportRequest encodes an ExportTraceServiceRequest with the given
// number of spans in each scope of each resource.
func exportRequest(tb testing.TB, spansPerScope ...[]int) []byte {
	tb.Helper()
	req := &collectortrace.ExportTraceServiceRequest{}
	for _, scopes := range spansPerScope {
		rs := &tracepb.ResourceSpans{SchemaUrl: "x"}
		for _, n := range scopes {
			ss := &tracepb.ScopeSpans{SchemaUrl: "y"}
			for i := 0; i < n; i++ {
				ss.Spans = append(ss.Spans, &tracepb.Span{
					TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8),
					Name: fmt.Sprintf("span %d", i), StartTimeUnixNano: 1, EndTimeUnixNano: 2,
					Kind: tracepb.Span_SPAN_KIND_PRODUCER,
				})
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	b, err := proto.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestOTLPSinkCountsExports posts exports smaller and larger than the
// read buffer over one keep-alive connection with net/http's client and
// checks the replies and what the sink counted.
func TestOTLPSinkCountsExports(t *testing.T) {
	sink := startSink(t)
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + sink.addr + "/v1/traces"
	bodies := [][]byte{
		{},                         // no resources: 0 spans
		exportRequest(t, []int{1}), // 1
		exportRequest(t, []int{300, 2}, []int{5}), // 307
		exportRequest(t, []int{40000}),            // larger than sinkReadSize
	}
	if len(bodies[3]) <= sinkReadSize {
		t.Fatalf("the large export is %d bytes, not above the read buffer", len(bodies[3]))
	}
	var wantBytes int64
	for _, body := range bodies {
		resp, err := client.Post(url, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("post %d bytes: %v", len(body), err)
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(reply) != 0 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Fatalf("post %d bytes: status %d, %d reply bytes, content type %q", len(body), resp.StatusCode, len(reply), resp.Header.Get("Content-Type"))
		}
		wantBytes += int64(len(body))
	}
	client.CloseIdleConnections()
	want := sinkCounts{requests: int64(len(bodies)), bytes: wantBytes, spans: 40308}
	if got := sink.stop(t); got != want {
		t.Errorf("the sink counted %+v, want %+v", got, want)
	}
}

// TestOTLPSinkPipelinedAndSplit writes three requests in one write, then
// one a byte at a time, and expects four replies in order on one
// connection.
func TestOTLPSinkPipelinedAndSplit(t *testing.T) {
	sink := startSink(t)
	c := sink.dial(t)
	// A header name in lower case, as HTTP allows.
	req := strings.Replace(postRequest(exportRequest(t, []int{3})), "Content-Length", "content-length", 1)
	if _, err := io.WriteString(c, req+req+req); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(req); i++ {
		if _, err := io.WriteString(c, req[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(c)
	for i := 0; i < 4; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("reply %d: status %d", i, resp.StatusCode)
		}
	}
	c.Close()
	if got := sink.stop(t); got.requests != 4 || got.spans != 12 || got.bad != 0 {
		t.Errorf("the sink counted %+v, want 4 requests, 12 spans", got)
	}
}

// TestOTLPSinkRejects checks the error replies: each closes the
// connection and counts as bad; a body that is not an export is answered
// 200 and counted as bad. Each request ends where the sink stops reading
// it (the endless header is one byte over the limit), so that the close
// is not a reset that could discard the reply.
func TestOTLPSinkRejects(t *testing.T) {
	cases := []struct {
		name, request, status string
	}{
		{"chunked", "POST /v1/traces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "411"},
		{"no length", "POST /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n", "411"},
		{"GET", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
		{"bad length", "POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n", "400"},
		{"two lengths", "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", "400"},
		{"no colon", "POST / HTTP/1.1\r\nHost x\r\n\r\n", "400"},
		{"too large", fmt.Sprintf("POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n", sinkMaxBody+1), "413"},
		{"endless header", "POST / HTTP/1.1\r\nX: " + strings.Repeat("a", sinkMaxHeader-19), "400"},
		{"not protobuf", "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n\x0a\x05", "200"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sink := startSink(t)
			c := sink.dial(t)
			go io.WriteString(c, tc.request)
			reply, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(reply, "HTTP/1.1 "+tc.status+" ") {
				t.Fatalf("reply %q, want status %s", reply, tc.status)
			}
			if tc.status != "200" {
				// The sink closes after an error reply.
				if _, err := io.ReadAll(c); err != nil {
					t.Fatalf("reading to the close: %v", err)
				}
			}
			c.Close()
			if got := sink.stop(t); got.bad != 1 {
				t.Errorf("the sink counted %+v, want 1 bad", got)
			}
		})
	}
}

// TestCountSpansTruncated cuts an export at every length and expects
// either the spans of a complete prefix or -1, never a panic.
func TestCountSpansTruncated(t *testing.T) {
	b := exportRequest(t, []int{2, 1}, []int{3})
	if got := countSpans(b); got != 6 {
		t.Fatalf("countSpans = %d, want 6", got)
	}
	for i := 0; i < len(b); i++ {
		if got := countSpans(b[:i]); got > 6 {
			t.Fatalf("countSpans of %d bytes = %d", i, got)
		}
	}
}

// TestSinkParsingAllocatesNothing: the sink runs without a garbage
// collector, so reading a request's head and counting its spans must not
// allocate.
func TestSinkParsingAllocatesNothing(t *testing.T) {
	body := exportRequest(t, []int{5, 2}, []int{3})
	head := []byte("POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 123\r\n\r\n")
	allocs := testing.AllocsPerRun(100, func() {
		if n, errReply := parseSinkHead(head); n != 123 || errReply != "" {
			t.Fatalf("parseSinkHead = %d, %q", n, errReply)
		}
		if n := countSpans(body); n != 10 {
			t.Fatalf("countSpans = %d", n)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request", allocs)
	}
}

// TestOTLPSinkConnectionLimit holds sinkMaxConns connections, each
// blocked in the sink's raw read after a request, and expects the next
// connection to be closed at once and the sink still to stop on SIGTERM
// (its signal goroutine needs a P the readers do not hold).
func TestOTLPSinkConnectionLimit(t *testing.T) {
	sink := startSink(t)
	req := postRequest(exportRequest(t, []int{1}))
	for i := 0; i < sinkMaxConns; i++ {
		c := sink.dial(t)
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		resp.Body.Close()
	}
	extra := sink.dial(t)
	if n, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection over the limit: read %d bytes, %v; want EOF", n, err)
	}
	if got := sink.stop(t); got.requests != sinkMaxConns || got.spans != sinkMaxConns {
		t.Errorf("the sink counted %+v, want %d requests and spans", got, sinkMaxConns)
	}
}

// scriptedConn feeds serveConn a fixed input in reads of at most chunk
// bytes and keeps what it writes.
type scriptedConn struct {
	in    []byte
	chunk int
	out   bytes.Buffer
}

func (c *scriptedConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.chunk)], c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *scriptedConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// FuzzOTLPSinkServe runs the sink's connection loop on arbitrary input,
// cut into reads of any size: it must end (the input runs out), answer
// no more requests than the input starts, every reply a whole status
// line, and count spans only from bodies that parse.
func FuzzOTLPSinkServe(f *testing.F) {
	f.Add([]byte(postRequest(exportRequest(f, []int{2}))+postRequest(exportRequest(f, []int{1, 1}, []int{3}))), uint8(7))
	f.Add([]byte(postRequest(nil)), uint8(1))
	f.Add([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), uint8(255))
	f.Add([]byte("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"), uint8(3))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"), uint8(0))
	sink := newOTLPSink()
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		before := sink.requests.Load()
		beforeSpans := sink.spans.Load()
		c := &scriptedConn{in: in, chunk: int(chunk) + 1}
		sink.serveConn(c)
		answered := sink.requests.Load() - before
		if max := int64(bytes.Count(in, []byte("POST "))); answered > max {
			t.Fatalf("%d requests answered, the input starts at most %d", answered, max)
		}
		if sink.spans.Load() < beforeSpans {
			t.Fatal("the span count went down")
		}
		for rest := c.out.String(); rest != ""; {
			line, after, ok := strings.Cut(rest, "\r\n\r\n")
			if !ok || !strings.HasPrefix(line, "HTTP/1.1 ") {
				t.Fatalf("reply %q", rest)
			}
			rest = after
		}
	})
}
