package tracing

import (
	"strings"
	"testing"
)

// resolved is Config with every default filled, the base of expectations.
func resolved(mod func(*Config)) Config {
	c := Config{
		Endpoint:    DefaultHTTPEndpoint,
		Protocol:    DefaultProtocol,
		ServiceName: DefaultServiceName,
		Sampler:     DefaultSampler,
		SampleRatio: 1,
		QueueSize:   DefaultQueueSize,
		TableSize:   DefaultTableSize,
	}
	if mod != nil {
		mod(&c)
	}
	return c
}

func TestConfigWithEnv(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		env     map[string]string
		want    Config
		wantErr []string // substrings, one per expected error
	}{
		{
			name: "zero config, no env: off",
			want: resolved(nil),
		},
		{
			name: "config enables, defaults fill the rest",
			cfg:  Config{Enabled: true},
			want: resolved(func(c *Config) { c.Enabled = true }),
		},
		{
			name: "general endpoint turns it on; traces path appended to the base",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318/otlp"},
			want: resolved(func(c *Config) { c.Enabled = true; c.Endpoint = "http://jaeger:4318/otlp/v1/traces" }),
		},
		{
			name: "traces endpoint wins over general and is used as is",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://general:4318",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces:4318/custom",
			},
			want: resolved(func(c *Config) { c.Enabled = true; c.Endpoint = "https://traces:4318/custom" }),
		},
		{
			name: "traces endpoint without path means the root",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318"},
			want: resolved(func(c *Config) { c.Enabled = true; c.Endpoint = "http://traces:4318/" }),
		},
		{
			name: "grpc protocol: default port 4317, no path added",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4317",
			},
			want: resolved(func(c *Config) { c.Enabled = true; c.Protocol = "grpc"; c.Endpoint = "http://jaeger:4317" }),
		},
		{
			name: "grpc with no endpoint anywhere",
			cfg:  Config{Enabled: true},
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			want: resolved(func(c *Config) { c.Enabled = true; c.Protocol = "grpc"; c.Endpoint = DefaultGRPCEndpoint }),
		},
		{
			name: "bare host:port is TLS unless insecure",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: resolved(func(c *Config) { c.Enabled = true; c.Protocol = "grpc"; c.Endpoint = "https://collector:4317" }),
		},
		{
			name: "bare host:port, insecure",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
				"OTEL_EXPORTER_OTLP_INSECURE": "true"},
			want: resolved(func(c *Config) { c.Enabled = true; c.Protocol = "grpc"; c.Endpoint = "http://collector:4317" }),
		},
		{
			name: "config fields win over env",
			cfg: Config{Enabled: true, Endpoint: "http://file:4318", Protocol: "http/protobuf",
				ServiceName: "edge", SampleRatio: 0.25, QueueSize: 100},
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
				"OTEL_SERVICE_NAME": "env-name", "OTEL_TRACES_SAMPLER": "always_on",
				"OTEL_TRACES_SAMPLER_ARG": "0.5", "OTEL_BSP_MAX_QUEUE_SIZE": "7",
			},
			want: Config{Enabled: true, Endpoint: "http://file:4318/v1/traces", Protocol: "http/protobuf",
				ServiceName: "edge", Sampler: SamplerParentBasedTraceIDRatio, SampleRatio: 0.25, QueueSize: 100,
				TableSize: DefaultTableSize},
		},
		{
			name: "config endpoint with a path is used as is",
			cfg:  Config{Enabled: true, Endpoint: "https://gw.example.com/api/traces"},
			want: resolved(func(c *Config) { c.Enabled = true; c.Endpoint = "https://gw.example.com/api/traces" }),
		},
		{
			name: "service name from env, then from resource attributes",
			env:  map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=job%20gate"},
			want: resolved(func(c *Config) { c.ServiceName = "job gate" }),
		},
		{
			name: "OTEL_SERVICE_NAME beats resource attributes",
			env:  map[string]string{"OTEL_SERVICE_NAME": "gw", "OTEL_RESOURCE_ATTRIBUTES": "service.name=other"},
			want: resolved(func(c *Config) { c.ServiceName = "gw" }),
		},
		{
			name: "ratio sampler and argument from env",
			env:  map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
			want: resolved(func(c *Config) { c.Sampler = SamplerTraceIDRatio; c.SampleRatio = 0.1 }),
		},
		{
			name: "argument ignored for a non-ratio sampler",
			env:  map[string]string{"OTEL_TRACES_SAMPLER": "always_off", "OTEL_TRACES_SAMPLER_ARG": "oops"},
			want: resolved(func(c *Config) { c.Sampler = SamplerAlwaysOff }),
		},
		{
			name: "queue size from env",
			env:  map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "512"},
			want: resolved(func(c *Config) { c.QueueSize = 512 }),
		},
		{
			name: "OTEL_SDK_DISABLED beats the config",
			cfg:  Config{Enabled: true},
			env:  map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"},
			want: resolved(func(c *Config) { c.Endpoint = "http://jaeger:4318/v1/traces" }),
		},
		{
			name: "OTEL_SDK_DISABLED=false changes nothing",
			cfg:  Config{Enabled: true},
			env:  map[string]string{"OTEL_SDK_DISABLED": "false"},
			want: resolved(func(c *Config) { c.Enabled = true }),
		},
		{
			name: "OTEL_TRACES_EXPORTER=none turns it off",
			cfg:  Config{Enabled: true},
			env:  map[string]string{"OTEL_TRACES_EXPORTER": "none"},
			want: resolved(nil),
		},
		{
			name: "OTEL_TRACES_EXPORTER=otlp turns it on with defaults",
			env:  map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			want: resolved(func(c *Config) { c.Enabled = true }),
		},
		{
			name: "payload and command switches are config only",
			cfg:  Config{PayloadTraceparent: true, CommandSpans: true},
			want: resolved(func(c *Config) { c.PayloadTraceparent = true; c.CommandSpans = true }),
		},
		{
			name: "every bad value reported at once, with where it came from",
			cfg:  Config{Enabled: true, Protocol: "grcp", SampleRatio: 2, QueueSize: -1},
			env: map[string]string{
				"OTEL_TRACES_EXPORTER": "zipkin", "OTEL_TRACES_SAMPLER": "jaeger_remote",
				"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://x", "OTEL_BSP_MAX_QUEUE_SIZE": "many",
			},
			want: resolved(func(c *Config) { c.Enabled = true; c.Protocol = "grcp" }),
			wantErr: []string{
				"OTEL_TRACES_EXPORTER: \"zipkin\"",
				"tracing.protocol: \"grcp\"",
				"OTEL_TRACES_SAMPLER: \"jaeger_remote\"",
				"OTEL_EXPORTER_OTLP_ENDPOINT: \"ftp://x\"",
				"tracing.sample_ratio: 2",
				"tracing.queue_size: -1",
				"OTEL_BSP_MAX_QUEUE_SIZE: \"many\"",
			},
		},
		{
			name: "bad env values from the more specific variables are named",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
				"OTEL_TRACES_SAMPLER": "bogus", "OTEL_TRACES_SAMPLER_ARG": "1.5",
			},
			want: resolved(func(c *Config) { c.Enabled = true }),
			wantErr: []string{
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: \"http/json\"",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: \"http://\" has no host",
				"OTEL_TRACES_SAMPLER: \"bogus\"",
			},
		},
		{
			name: "bad env is not an error while tracing is off",
			env:  map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_SAMPLER": "bogus"},
			want: resolved(nil),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, err := tc.cfg.WithEnv()
			if got != tc.want {
				t.Errorf("WithEnv:\n got %+v\nwant %+v", got, tc.want)
			}
			var msg string
			if err != nil {
				msg = err.Error()
			}
			if n := strings.Count(msg, "\n") + 1; err != nil && n != len(tc.wantErr) {
				t.Errorf("got %d errors, want %d:\n%s", n, len(tc.wantErr), msg)
			}
			if err == nil && len(tc.wantErr) > 0 {
				t.Errorf("no error, want %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			// A resolved config resolves to itself.
			if err == nil {
				again, err := got.WithEnv()
				if err != nil || again != got {
					t.Errorf("second WithEnv: %+v, %v; want %+v", again, err, got)
				}
			}
		})
	}
}
