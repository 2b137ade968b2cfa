package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTracingFlagsSetConfig: each -tracing-* flag sets its field of the
// tracing section, over what the file says.
func TestTracingFlagsSetConfig(t *testing.T) {
	file := writeFile(t, "t.yaml", "tracing:\n  service_name: from-file\n  queue_size: 10\n")
	var stderr bytes.Buffer
	cfg, code := parseCommandLine([]string{"-config", file,
		"-tracing-enabled", "-tracing-endpoint", "http://127.0.0.1:4318", "-tracing-protocol", "grpc",
		"-tracing-service-name", "from-flag", "-tracing-sampler", "traceidratio", "-tracing-sample-ratio", "0.25",
		"-tracing-queue-size", "99", "-tracing-table-size", "7", "-tracing-payload-traceparent",
		"-tracing-command-spans", "-tracing-export-off-loop"}, &stderr)
	if cfg == nil {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	tr := cfg.Tracing
	if !tr.Enabled || tr.Endpoint != "http://127.0.0.1:4318" || tr.Protocol != "grpc" || tr.ServiceName != "from-flag" ||
		tr.Sampler != "traceidratio" || tr.SampleRatio != 0.25 || tr.QueueSize != 99 || tr.TableSize != 7 ||
		!tr.PayloadTraceparent || !tr.CommandSpans || !tr.ExportOffLoop {
		t.Errorf("tracing config %+v", tr)
	}
}

// TestTracingFlagErrors: a bad -tracing-* value is a usage error naming
// its field, exit code 2.
func TestTracingFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tracing-protocol", "smoke"}, "tracing.protocol"},
		{[]string{"-tracing-sampler", "sometimes"}, "tracing.sampler"},
		{[]string{"-tracing-sample-ratio", "2"}, "tracing.sample_ratio"},
		{[]string{"-tracing-sample-ratio", "half"}, "tracing.sample_ratio"},
		{[]string{"-tracing-queue-size", "-1"}, "tracing.queue_size"},
		{[]string{"-tracing-table-size", "x"}, "tracing.table_size"},
		{[]string{"-tracing-endpoint", "ftp://x"}, "tracing.endpoint"},
		{[]string{"-tracing-enabled=maybe"}, "tracing.enabled"},
	} {
		var stderr bytes.Buffer
		cfg, code := parseCommandLine(tc.args, &stderr)
		if cfg != nil || code != 2 {
			t.Errorf("%q: got config, exit %d", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: stderr %q lacks %q", tc.args, stderr.String(), tc.want)
		}
	}
}

// TestBinaryTracesWithFlagsOnly runs the binary with tracing set up by
// flags alone (no file, no OTEL_* variables) and checks that a Beanstalk
// job's spans reach the OTLP/HTTP receiver under the flag's service name.
func TestBinaryTracesWithFlagsOnly(t *testing.T) {
	clearOTELEnv(t)
	sink, endpoint := startSink(t, "http/protobuf")
	p := startJobgate(t, 1, "-gearman", "", "-beanstalk", "127.0.0.1:0", "-admin", "", "-data", "",
		"-tracing-enabled", "-tracing-endpoint", endpoint, "-tracing-protocol", "http/protobuf",
		"-tracing-service-name", "flagged", "-tracing-sampler", "always_on")
	beanstalkJob(t, p.addrs["beanstalk"])
	stopJobgate(t, p)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if !sink.service["flagged"] || len(sink.service) != 1 {
		t.Errorf("service names %v, want flagged", sink.service)
	}
	want := "" +
		"send emails (PRODUCER)\n" +
		"├── receive emails (CLIENT)\n" +
		"├── process emails (CONSUMER) outcome=released\n" +
		"├── receive emails (CLIENT)\n" +
		"└── process emails (CONSUMER) outcome=completed\n"
	if shape := renderShape(sink.spans); shape != want {
		t.Errorf("trace shape:\n%s\nwant:\n%s", shape, want)
	}
}
