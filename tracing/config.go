package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
)

// Protocols an OTLP exporter can speak. Jaeger accepts both natively
// (gRPC on 4317, HTTP on 4318).
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// Sampler names, the values of OTEL_TRACES_SAMPLER that jobgate supports.
const (
	SamplerAlwaysOn                = "always_on"
	SamplerAlwaysOff               = "always_off"
	SamplerTraceIDRatio            = "traceidratio"
	SamplerParentBasedAlwaysOn     = "parentbased_always_on"
	SamplerParentBasedAlwaysOff    = "parentbased_always_off"
	SamplerParentBasedTraceIDRatio = "parentbased_traceidratio"
)

// Defaults applied by [Config.WithEnv] when neither the config nor the
// environment sets a field.
const (
	DefaultServiceName = "jobgate"
	DefaultProtocol    = ProtocolHTTPProtobuf
	DefaultSampler     = SamplerParentBasedAlwaysOn
	DefaultQueueSize   = 2048
	// DefaultTableSize is how many jobs on upstream servers a gateway keeps
	// trace state for ([Table]).
	DefaultTableSize = 65536
	// DefaultHTTPEndpoint and DefaultGRPCEndpoint are the OTLP defaults of the
	// specification: a collector or Jaeger on the same host, in plain text.
	DefaultHTTPEndpoint = "http://localhost:4318/v1/traces"
	DefaultGRPCEndpoint = "http://localhost:4317"
)

// tracesPath is where OTLP/HTTP receivers, Jaeger included, accept spans.
const tracesPath = "/v1/traces"

// Config says whether and where jobgate exports traces. Its zero value is
// valid: tracing stays off unless the standard OTEL_* environment variables
// turn it on, so an operator can trace a config-less jobgate with nothing but
// OTEL_EXPORTER_OTLP_ENDPOINT.
//
// Precedence, applied by [Config.WithEnv] (and so by [New]):
//
//  1. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turns tracing off
//     whatever the config says: they are the operator's kill switch, and the
//     environment is the one thing that can be changed without editing files.
//  2. A field the config sets (non-zero) wins over the environment.
//  3. A field the config leaves zero is taken from the environment; the
//     signal-specific variable (OTEL_EXPORTER_OTLP_TRACES_*) wins over the
//     general one (OTEL_EXPORTER_OTLP_*), as the OTLP specification says.
//  4. Anything still unset gets its Default* value.
//
// Variables the exporters read themselves (OTEL_EXPORTER_OTLP_HEADERS,
// _CERTIFICATE, _CLIENT_KEY, _CLIENT_CERTIFICATE, _COMPRESSION, _TIMEOUT and
// their _TRACES_ forms) and OTEL_BSP_SCHEDULE_DELAY / OTEL_BSP_EXPORT_TIMEOUT
// (read by the batch processor) keep working; Config does not model them.
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE sets the job spans' batch (512 unset),
// capped at QueueSize so that a batch can always fill (see the Provider's
// drop accounting); the SDK's spans go in batches of min(512, QueueSize).
type Config struct {
	// Enabled turns tracing on. Left false, tracing is still on when
	// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_TRACES_EXPORTER=otlp is set; it is never on when
	// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
	Enabled bool `yaml:"enabled"`

	// Endpoint is the OTLP receiver's URL, e.g. "http://jaeger:4318" or, for
	// gRPC, "http://jaeger:4317". For http/protobuf a URL without a path gets
	// "/v1/traces" appended and a URL with a path (even "/") is used as is. The scheme
	// chooses TLS: https (or none, unless OTEL_EXPORTER_OTLP_INSECURE=true)
	// means TLS, http means plain text. Empty: the OTEL_EXPORTER_OTLP_*
	// ENDPOINT variables, then localhost.
	Endpoint string `yaml:"endpoint"`

	// Protocol is "grpc" or "http/protobuf". Empty:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, then
	// http/protobuf.
	Protocol string `yaml:"protocol"`

	// ServiceName is the service.name resource attribute, the name Jaeger
	// lists. Empty: OTEL_SERVICE_NAME, service.name in
	// OTEL_RESOURCE_ATTRIBUTES, then "jobgate".
	ServiceName string `yaml:"service_name"`

	// Sampler is one of the OTEL_TRACES_SAMPLER names: always_on, always_off,
	// traceidratio, parentbased_always_on, parentbased_always_off,
	// parentbased_traceidratio. Empty: parentbased_traceidratio when
	// SampleRatio is set, else OTEL_TRACES_SAMPLER, else
	// parentbased_always_on. A ratio sampler decides by trace id, so every
	// span of a job's trace shares the producer's decision.
	Sampler string `yaml:"sampler"`

	// SampleRatio is the fraction of jobs traced by the ratio samplers, in
	// (0, 1]. Zero means unset: OTEL_TRACES_SAMPLER_ARG, then 1. (To trace
	// nothing, turn tracing off or use always_off.)
	SampleRatio float64 `yaml:"sample_ratio"`

	// QueueSize caps the spans waiting for export. When it is full, new spans
	// are dropped and counted ([Provider.Dropped]) rather than blocking the
	// data path. Job spans and the SDK's spans (command spans, other
	// libraries) have a queue of this size each. Zero:
	// OTEL_BSP_MAX_QUEUE_SIZE, then 2048.
	QueueSize int `yaml:"queue_size"`

	// TableSize caps the jobs on upstream servers that a gateway keeps
	// trace state for (a [Table] entry: creation context, deliveries, open
	// process span), evicting the least recently used. Zero:
	// DefaultTableSize.
	TableSize int `yaml:"table_size"`

	// PayloadTraceparent wraps job bodies delivered to workers in a
	// traceparent envelope (see package jobctx) so workers can continue the
	// trace. Off by default: a worker that does not strip the envelope sees a
	// body 69 bytes longer than the one submitted.
	PayloadTraceparent bool `yaml:"payload_traceparent"`

	// CommandSpans makes a span for each admin and stats command (stats,
	// stats-tube, list-tubes, Gearman text status/workers, ...). Off by
	// default: such commands are frequent monitoring polls that would drown
	// the job traces.
	CommandSpans bool `yaml:"command_spans"`

	// ExportOffLoop sends every batch of job spans from the export
	// goroutine. Off by default: the event loop whose span fills a batch
	// sends it itself when that needs no wait (an OTLP/HTTP endpoint over
	// plain TCP), which on a machine the event loops keep busy costs less
	// throughput than waking another thread for each batch. Turn it on
	// where CPUs outnumber the busy event loops, to keep the encoding (about
	// 0.7 µs per job) off the loops.
	ExportOffLoop bool `yaml:"export_off_loop"`
}

// WithEnv returns c completed from the OTEL_* environment variables and the
// defaults, in the precedence documented on [Config]. Every field of the
// result is set, so a second WithEnv changes nothing (unless the environment
// changed). The error lists every invalid value at once, each naming the
// config field or variable it came from; it is nil when the result has
// tracing off, since nothing else is used then.
func (c Config) WithEnv() (Config, error) {
	return c.resolve(os.LookupEnv)
}

// lookupFunc is the shape of os.LookupEnv.
type lookupFunc func(string) (string, bool)

// resolve implements WithEnv with the environment passed in, which keeps the
// precedence logic in one place.
func (c Config) resolve(lookup lookupFunc) (Config, error) {
	env := func(names ...string) (string, string) {
		for _, n := range names {
			if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v), n
			}
		}
		return "", ""
	}
	var errs []error
	bad := func(where, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
	}

	// Enabled: kill switches first, then config, then env.
	exporter, exporterVar := env("OTEL_TRACES_EXPORTER")
	disabled, _ := env("OTEL_SDK_DISABLED")
	switch exporter {
	case "", "otlp", "none":
	default:
		bad(exporterVar, "%q is not supported (only otlp or none)", exporter)
	}
	rawTracesEndpoint, _ := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	rawEndpoint, _ := env("OTEL_EXPORTER_OTLP_ENDPOINT")
	c.Enabled = c.Enabled || exporter == "otlp" || rawTracesEndpoint != "" || rawEndpoint != ""
	if strings.EqualFold(disabled, "true") || exporter == "none" {
		c.Enabled = false
	}

	// Protocol before endpoint: the protocol decides the default port and
	// whether the traces path is appended.
	where := "tracing.protocol"
	if c.Protocol == "" {
		c.Protocol, where = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch c.Protocol {
	case "":
		c.Protocol = DefaultProtocol
	case ProtocolGRPC, ProtocolHTTPProtobuf:
	default:
		bad(where, "%q is not grpc or http/protobuf", c.Protocol)
		// A bad config value stays, so the caller sees what was wrong; a
		// bad environment value falls back like an unset one.
		if where != "tracing.protocol" {
			c.Protocol = DefaultProtocol
		}
	}

	insecureEnv, _ := env("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE")
	insecure := strings.EqualFold(insecureEnv, "true")
	c.Endpoint = c.resolveEndpoint(rawTracesEndpoint, rawEndpoint, insecure, bad)
	if c.Endpoint == "" {
		c.Endpoint = DefaultHTTPEndpoint
		if c.Protocol == ProtocolGRPC {
			c.Endpoint = DefaultGRPCEndpoint
		}
	}

	if c.ServiceName == "" {
		c.ServiceName, _ = env("OTEL_SERVICE_NAME")
	}
	if c.ServiceName == "" {
		ra, _ := env("OTEL_RESOURCE_ATTRIBUTES")
		c.ServiceName = resourceServiceName(ra)
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}

	c.resolveSampler(env, bad)

	if c.QueueSize < 0 {
		bad("tracing.queue_size", "%d is negative", c.QueueSize)
		c.QueueSize = 0
	}
	if c.QueueSize == 0 {
		if v, n := env("OTEL_BSP_MAX_QUEUE_SIZE"); v != "" {
			q, err := strconv.Atoi(v)
			if err != nil || q <= 0 {
				bad(n, "%q is not a positive integer", v)
			} else {
				c.QueueSize = q
			}
		}
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.TableSize < 0 {
		bad("tracing.table_size", "%d is negative", c.TableSize)
		c.TableSize = 0
	}
	if c.TableSize == 0 {
		c.TableSize = DefaultTableSize
	}

	if !c.Enabled {
		return c, nil
	}
	return c, errors.Join(errs...)
}

// resolveEndpoint returns the complete exporter URL from the config field or
// the two endpoint variables, or "" if none is set or the one that is set is
// invalid (reported through bad).
func (c *Config) resolveEndpoint(tracesVar, generalVar string, insecure bool, bad func(string, string, ...any)) string {
	grpc := c.Protocol == ProtocolGRPC
	switch {
	case c.Endpoint != "":
		u, err := endpointURL(c.Endpoint, insecure)
		if err != nil {
			bad("tracing.endpoint", "%v", err)
			return ""
		}
		// A bare host:port means the collector's root, so the standard
		// traces path applies; any explicit path, even "/", is the
		// operator's. That also makes a resolved endpoint resolve to itself.
		if !grpc && u.Path == "" {
			u.Path = tracesPath
		}
		return u.String()
	case tracesVar != "":
		// The signal-specific variable is a complete URL, used as is
		// except that no path means the root.
		u, err := endpointURL(tracesVar, insecure)
		if err != nil {
			bad("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "%v", err)
			return ""
		}
		if !grpc && u.Path == "" {
			u.Path = "/"
		}
		return u.String()
	case generalVar != "":
		// The general variable is a base URL: OTLP/HTTP appends the
		// signal's path to whatever path it has.
		u, err := endpointURL(generalVar, insecure)
		if err != nil {
			bad("OTEL_EXPORTER_OTLP_ENDPOINT", "%v", err)
			return ""
		}
		if !grpc {
			u.Path = path.Join("/", u.Path, tracesPath)
		}
		return u.String()
	}
	return ""
}

// resolveSampler fills Sampler and SampleRatio. A ratio in the config implies
// a ratio sampler, so that "sample_ratio: 0.1" alone does what it says even
// when the environment names another sampler.
func (c *Config) resolveSampler(env func(...string) (string, string), bad func(string, string, ...any)) {
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		bad("tracing.sample_ratio", "%v is not in (0, 1]", c.SampleRatio)
		c.SampleRatio = 0
	}
	if c.Sampler == "" && c.SampleRatio > 0 {
		c.Sampler = SamplerParentBasedTraceIDRatio
	}
	where := "tracing.sampler"
	if c.Sampler == "" {
		c.Sampler, where = env("OTEL_TRACES_SAMPLER")
	}
	switch c.Sampler {
	case "":
		c.Sampler = DefaultSampler
	case SamplerAlwaysOn, SamplerAlwaysOff, SamplerTraceIDRatio,
		SamplerParentBasedAlwaysOn, SamplerParentBasedAlwaysOff, SamplerParentBasedTraceIDRatio:
	default:
		bad(where, "%q is not a supported sampler", c.Sampler)
		c.Sampler = DefaultSampler
	}

	if c.SampleRatio == 0 {
		c.SampleRatio = 1
		// The argument means something only to the ratio samplers; the
		// specification says to ignore it otherwise.
		if v, n := env("OTEL_TRACES_SAMPLER_ARG"); v != "" && isRatioSampler(c.Sampler) {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || r < 0 || r > 1 {
				bad(n, "%q is not a ratio in [0, 1]", v)
			} else {
				c.SampleRatio = r
			}
		}
	}
}

func isRatioSampler(s string) bool {
	return s == SamplerTraceIDRatio || s == SamplerParentBasedTraceIDRatio
}

// endpointURL parses an endpoint that may lack a scheme. The OTLP
// specification lets gRPC endpoints be bare host:port and secures them unless
// told otherwise, so a missing scheme becomes https, or http when insecure.
func endpointURL(s string, insecure bool) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		scheme := "https://"
		if insecure {
			scheme = "http://"
		}
		s = scheme + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", s)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q has no host", s)
	}
	return u, nil
}

// resourceServiceName finds service.name in an OTEL_RESOURCE_ATTRIBUTES
// value (comma-separated key=value pairs, values percent-encoded).
func resourceServiceName(attrs string) string {
	for kv := range strings.SplitSeq(attrs, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) != "service.name" {
			continue
		}
		if d, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			return d
		}
		return strings.TrimSpace(v)
	}
	return ""
}
