package config

import (
	"fmt"
	"reflect"
	"strings"
)

// FlagFields maps each jobgate command-line flag that overrides a config
// field to that field's path, so that cmd can apply the flags the user set
// with [Config.Set] after [Load]:
//
//	flags.Visit(func(f *flag.Flag) {
//		if path, ok := fields[f.Name]; ok {
//			err = errors.Join(err, cfg.Set(path, f.Value.String()))
//		}
//	})
//
// A flag's name is its field's path with "." and "_" written "-", except
// that listen addresses drop "-listen" (-gearman for gearman.listen,
// -gearman-tls for gearman.tls_listen) and data.dir is -data, as in the
// DESIGN's command line. -gearman-upstream and -beanstalk-upstream are not
// fields; see [Upstreams]. Each call returns a new map.
func FlagFields() map[string]string {
	return map[string]string{
		"gearman":                       "gearman.listen",
		"gearman-tls":                   "gearman.tls_listen",
		"gearman-max-packet-size":       "gearman.max_packet_size",
		"gearman-max-admin-line":        "gearman.max_admin_line",
		"gearman-job-retries":           "gearman.job_retries",
		"gearman-handle-prefix":         "gearman.handle_prefix",
		"gearman-exceptions":            "gearman.exceptions",
		"gearman-admin-shutdown":        "gearman.admin_shutdown",
		"beanstalk":                     "beanstalk.listen",
		"beanstalk-tls":                 "beanstalk.tls_listen",
		"beanstalk-max-job-size":        "beanstalk.max_job_size",
		"beanstalk-quote-stats":         "beanstalk.quote_stats",
		"admin":                         "admin.listen",
		"admin-max-connections":         "admin.max_connections",
		"data":                          "data.dir",
		"data-fsync":                    "data.fsync",
		"data-fsync-interval":           "data.fsync_interval",
		"auth-max-bad-tokens":           "auth.max_bad_tokens",
		"log-level":                     "log.level",
		"log-format":                    "log.format",
		"shutdown-timeout":              "shutdown_timeout",
		"loop-wait":                     "loop_wait",
		"loop-spin":                     "loop_spin",
		"io-uring":                      "io_uring",
		"limits-max-connections":        "limits.max_connections",
		"limits-max-connections-per-ip": "limits.max_connections_per_ip",
		"limits-idle-timeout":           "limits.idle_timeout",
		"limits-read-timeout":           "limits.read_timeout",
		"limits-write-timeout":          "limits.write_timeout",
		"limits-max-reserved-per-conn":  "limits.max_reserved_per_conn",
		"limits-write-buffer-limit":     "limits.write_buffer_limit",
		"limits-handshake-timeout":      "limits.handshake_timeout",
		"limits-max-handshakes":         "limits.max_handshakes",
		"tracing-enabled":               "tracing.enabled",
		"tracing-endpoint":              "tracing.endpoint",
		"tracing-protocol":              "tracing.protocol",
		"tracing-service-name":          "tracing.service_name",
		"tracing-sampler":               "tracing.sampler",
		"tracing-sample-ratio":          "tracing.sample_ratio",
		"tracing-queue-size":            "tracing.queue_size",
		"tracing-table-size":            "tracing.table_size",
		"tracing-payload-traceparent":   "tracing.payload_traceparent",
		"tracing-command-spans":         "tracing.command_spans",
		"tracing-export-off-loop":       "tracing.export_off_loop",
	}
}

// Get returns the field at path in the text form [Config.Set] takes (a list
// of strings comma-separated), so that help text can show defaults from
// [Default] rather than repeating them.
func (c *Config) Get(path string) (string, error) {
	v, err := fieldByPath(reflect.ValueOf(c).Elem(), path)
	if err != nil {
		return "", &FieldError{Path: path, Msg: err.Error()}
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String(), nil
	}
	switch v.Kind() {
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			items := make([]string, v.Len())
			for i := range items {
				items[i] = v.Index(i).String()
			}
			return strings.Join(items, ","), nil
		}
	case reflect.Struct:
	default:
		return fmt.Sprint(v.Interface()), nil
	}
	return "", &FieldError{Path: path, Msg: "not a single value"}
}
