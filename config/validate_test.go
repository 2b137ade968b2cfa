package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("Default().Warnings() = %v", w)
	}
	// Each call is a new Config.
	c.Gearman.Listen = ""
	if Default().Gearman.Listen != ":4730" {
		t.Error("Default() returned a shared Config")
	}
	if all := c.AllBackends(); len(all) != 1 || all[0] != LocalBackend() {
		t.Errorf("AllBackends() = %+v, want the implicit local backend", all)
	}
}

// TestValidateInCode checks a Config built in code: every error at once,
// paths without positions, in the order found.
func TestValidateInCode(t *testing.T) {
	c := Default()
	c.Gearman.Listen = "4730"
	c.Data.Fsync = "sometimes"
	c.Log.Level = "loud"
	c.Backends = []Backend{{Name: "gm1", ID: 1, Type: TypeGearman, Address: "gm1:4730"}}
	c.Routes.GearmanDefault = "gm-pool"
	err := c.Validate()
	want := strings.Join([]string{
		`gearman.listen: "4730" is not host:port: missing port in address`,
		`data.fsync: "sometimes" is not always, interval or never`,
		`log.level: "loud" is not debug, info, warn or error`,
		`backends[0].dial_timeout: 0s: want more than 0, or a dead host would hang every request routed to it`,
		`routes.gearman_default: "gm-pool" is not a pool or backend`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("Validate() =\n%v\nwant\n%s", err, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "gearman.listen" || fe.Line != 0 || fe.File != "" {
		t.Errorf("errors.As gave %+v", fe)
	}
}

// TestValidateRules checks one rule at a time on a Config built in code.
func TestValidateRules(t *testing.T) {
	gm := func(name string, id int, addr string) Backend {
		b := DefaultBackend()
		b.Name, b.ID, b.Type, b.Address = name, id, TypeGearman, addr
		return b
	}
	withCert := func(c *Config) {
		c.TLS.Certificates = []CertKey{{CertFile: "c.pem", KeyFile: "k.pem"}}
	}
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // the whole error; "" for none
	}{
		{"port 0 twice is fine", func(c *Config) { c.Gearman.Listen, c.Beanstalk.Listen = "127.0.0.1:0", ":0" }, ""},
		{"different hosts, same port", func(c *Config) { c.Gearman.Listen, c.Beanstalk.Listen = "127.0.0.1:7000", "127.0.0.2:7000" }, ""},
		{"wildcard collides", func(c *Config) { c.Gearman.Listen, c.Beanstalk.Listen = "127.0.0.1:7000", "[::]:07000" },
			`beanstalk.listen: "[::]:07000" collides with gearman.listen ("127.0.0.1:7000")`},
		{"admin collides", func(c *Config) { c.Admin.Listen = ":4730" },
			`admin.listen: ":4730" collides with gearman.listen (":4730")`},
		{"acme challenge collides only when acme is on", func(c *Config) { c.Admin.Listen = ":80" }, ""},
		{"acme challenge collides", func(c *Config) { c.Admin.Listen = ":80"; c.TLS.ACME.Domains = []string{"a.example"} },
			`tls.acme.challenge_listen: ":80" collides with admin.listen (":80")`},
		{"tls listener without certificate", func(c *Config) { c.Beanstalk.TLSListen = ":11301" },
			"beanstalk.tls_listen: TLS needs a certificate: set tls.certificates or tls.acme.domains"},
		{"admin tls without certificate", func(c *Config) { c.Admin.TLS = true },
			"admin.tls: TLS needs a certificate: set tls.certificates or tls.acme.domains"},
		{"tls listener with acme", func(c *Config) { c.Gearman.TLSListen = ":4731"; c.TLS.ACME.Domains = []string{"a.example"} }, ""},
		{"acme wildcard", func(c *Config) {
			c.TLS.ACME.Domains = []string{"*.example.com", "ok.example", "OK.example.", "bad_name"}
		}, strings.Join([]string{
			`tls.acme.domains[0]: "*.example.com": wildcard certificates need the DNS challenge, which jobgate does not offer`,
			`tls.acme.domains[2]: "OK.example." is also domains[1]`,
			`tls.acme.domains[3]: "bad_name" is not a domain name`}, "\n")},
		{"acme email with a display name", func(c *Config) {
			c.TLS.ACME.Domains = []string{"a.example"}
			c.TLS.ACME.Email = "Ops <ops@example.com>"
		}, `tls.acme.email: "Ops <ops@example.com>" is not an email address like ops@example.com`},
		{"acme root without ca", func(c *Config) { c.TLS.ACME.Domains = []string{"a.example"}; c.TLS.ACME.CARootFile = "r.pem" },
			"tls.acme.ca_root_file: set, but tls.acme.ca is empty: a private root is for a private CA's directory URL"},
		{"client ca without client auth", func(c *Config) { c.TLS.ClientCAFile = "ca.pem" },
			"tls.client_ca_file: set, but client_auth is none so no client certificate is asked for; set client_auth to request or require"},
		{"cert_names without client certificates", func(c *Config) {
			c.Auth.Identities = []Identity{{Name: "a", CertNames: []string{"a.internal", " "}}}
		}, "auth.identities[0].cert_names: need client certificates: set tls.client_auth to request or require\nauth.identities[0].cert_names[1]: empty name"},
		{"auth with identities and rules", func(c *Config) {
			c.Auth.Enabled = true
			c.Auth.Identities = []Identity{{Name: "a", CIDRs: []string{"10.0.0.0/8", "2001:db8::/32"}}}
			c.Auth.Rules = []Rule{{Identity: "a", Produce: []string{"x.*"}}, {Identity: "*", Consume: []string{"[a-c]?"}}}
		}, ""},
		{"upstream tls fields without enabled", func(c *Config) {
			b := gm("gm1", 1, "gm1:4730")
			b.TLS = ClientTLS{CAFile: "ca.pem", CertFile: "c.pem"}
			c.Backends = []Backend{b}
		}, "backends[0].tls.key_file: required when cert_file is set\nbackends[0].tls.ca_file: set, but backends[0].tls.enabled is false\nbackends[0].tls.cert_file: set, but backends[0].tls.enabled is false"},
		{"same upstream twice", func(c *Config) { c.Backends = []Backend{gm("a", 1, "h:1"), gm("b", 2, "h:1")} },
			`backends[1].address: "h:1" is also the address of backends[0]`},
		{"upstream is jobgate itself", func(c *Config) {
			c.Backends = []Backend{gm("a", 1, "localhost:4730"), gm("b", 2, "127.0.0.2:11300"), gm("c", 3, "10.0.0.1:4730")}
		},
			"backends[0].address: \"localhost:4730\" is jobgate's own gearman.listen (\":4730\"): jobs would loop back to it\n" +
				"backends[1].address: \"127.0.0.2:11300\" is jobgate's own beanstalk.listen (\":11300\"): jobs would loop back to it"},
		{"port 0 upstream", func(c *Config) { c.Backends = []Backend{gm("a", 1, "h:0")} },
			`backends[0].address: "h:0": port "0" is not a number from 1 to 65535`},
		{"local declared wrongly", func(c *Config) {
			c.Backends = []Backend{{Name: LocalName, Type: TypeGearman, TLS: ClientTLS{Enabled: true}}}
		}, "backends[0].type: \"gearman\": the backend named \"local\" is the in-process engines, type local\nbackends[0].tls: the local backend is in-process and has no TLS"},
		{"pool named local", func(c *Config) {
			c.Pools = []Pool{{Name: LocalName, Strategy: StrategyShard, Backends: []string{LocalName}}}
		},
			`pools[0].name: "local" is also a backend's name; pools and backends share one namespace`},
		{"pool of pools", func(c *Config) {
			c.Pools = []Pool{{Name: "p", Strategy: StrategyShard, Backends: []string{"local"}}, {Name: "q", Strategy: StrategyFailover, Backends: []string{"p"}}}
		}, `pools[1].backends[0]: "p" is a pool; a pool holds backends`},
		{"route to a pool named as backend", func(c *Config) {
			c.Pools = []Pool{{Name: "p", Strategy: StrategyShard, Backends: []string{"local"}}}
			c.Routes.Beanstalk = []Route{{Exact: "t", Backend: "p"}}
		}, `routes.beanstalk[0].backend: "p" is a pool, not a backend; write pool: p`},
		{"default to a beanstalk backend for gearman", func(c *Config) {
			b := gm("bs", 2, "bs:11300")
			b.Type = TypeBeanstalk
			c.Backends = []Backend{b}
			c.Routes.GearmanDefault = "bs"
		}, `routes.gearman_default: backend "bs" is type beanstalk and cannot serve gearman`},
		{"names", func(c *Config) { c.Backends = []Backend{gm("", 1, "h:1"), gm("a b", 2, "h:2")} },
			"backends[0].name: required\nbackends[1].name: \"a b\" is not a name: want up to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"},
		{"breaker off needs no timeouts", func(c *Config) {
			b := gm("a", 1, "h:1")
			b.Breaker = Breaker{}
			c.Backends = []Backend{b}
		}, ""},
		{"negative values", func(c *Config) {
			c.Limits.MaxConnections = -1
			c.Limits.IdleTimeout = -time.Second
			c.Limits.WriteBufferLimit = -1
			c.Gearman.JobRetries = -2
			c.ShutdownTimeout = -1
		}, strings.Join([]string{
			"gearman.job_retries: -2 is less than 0",
			"limits.max_connections: -1 is less than 0",
			"limits.idle_timeout: -1s is negative",
			"limits.write_buffer_limit: -1 is negative",
			"shutdown_timeout: -1ns is negative",
		}, "\n")},
		{"loop wait", func(c *Config) { c.LoopWait = "spin" }, `loop_wait: "spin" is not auto or park`},
		{"loop wait park", func(c *Config) { c.LoopWait = LoopWaitPark }, ""},
		{"loop spin", func(c *Config) { c.LoopSpin = 30 * time.Microsecond }, ""},
		{"loop spin at most", func(c *Config) { c.LoopSpin = MaxLoopSpin }, ""},
		{"loop spin too long", func(c *Config) { c.LoopSpin = 2 * time.Millisecond }, "loop_spin: 2ms is not between 0 and 1ms"},
		{"loop spin negative", func(c *Config) { c.LoopSpin = -time.Microsecond }, "loop_spin: -1µs is not between 0 and 1ms"},
		{"handshake limits", func(c *Config) {
			c.Limits.HandshakeTimeout = 0
			c.Limits.MaxHandshakes = -1
		}, strings.Join([]string{
			"limits.handshake_timeout: 0s is not more than 0",
			"limits.max_handshakes: -1 is less than 0",
		}, "\n")},
		{"sizes", func(c *Config) {
			c.Gearman.MaxPacketSize = 4 * GiB
			c.Gearman.MaxAdminLine = 10
			c.Beanstalk.MaxJobSize = 0
		}, strings.Join([]string{
			"gearman.max_packet_size: 4GiB is out of range: want 1 to 4294967295",
			"gearman.max_admin_line: 10 is out of range: want 64 to 1MiB",
			"beanstalk.max_job_size: 0 is out of range: want 1 to 1GiB",
		}, "\n")},
		{"handle prefix too long", func(c *Config) { c.Gearman.HandlePrefix = strings.Repeat("h", 33) },
			"gearman.handle_prefix: 33 bytes long: at most 32, so that handles stay within Gearman's 64"},
		{"fsync never needs no interval", func(c *Config) { c.Data.Fsync = FsyncNever; c.Data.FsyncInterval = 0 }, ""},
		{"fsync interval zero", func(c *Config) { c.Data.FsyncInterval = 0 },
			"data.fsync_interval: 0s: the interval policy needs a period more than 0"},
		{"tracing", func(c *Config) {
			c.Tracing.Endpoint = "ftp://x"
			c.Tracing.Protocol = "thrift"
			c.Tracing.Sampler = "sometimes"
			c.Tracing.SampleRatio = 1.5
			c.Tracing.QueueSize = -1
		}, strings.Join([]string{
			`tracing.endpoint: "ftp://x" is not an http:// or https:// URL with a host`,
			`tracing.protocol: "thrift" is not grpc or http/protobuf`,
			`tracing.sampler: "sometimes" is not always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio`,
			`tracing.sample_ratio: 1.5 is not in (0, 1] (0 means unset)`,
			`tracing.queue_size: -1 is less than 0`,
		}, "\n")},
		{"tracing endpoint without scheme", func(c *Config) { c.Tracing.Endpoint = "jaeger:4317"; c.Tracing.Protocol = "grpc" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			withCert(c)
			c.TLS.Certificates = nil
			tt.modify(c)
			got := ""
			if err := c.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	c, err := Parse("w.yaml", []byte(`
auth:
  identities:
    - { name: ci, token: s3cret }
backends:
  - { name: gm1, id: 1, type: gearman, address: "h:1", tls: { enabled: true, insecure_skip_verify: true } }
routes:
  gearman:
    - { glob: "*", backend: gm1 }
    - { exact: "never", backend: local }
`))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"w.yaml:2:1: auth.enabled: false, so the identities and rules below are not enforced",
		"w.yaml:4:26: auth.identities[0].token: a secret written in the config file; prefer tokens_file, readable only by jobgate",
		"w.yaml:6:100: backends[0].tls.insecure_skip_verify: the server's certificate is not verified, so anyone on the path can impersonate it; use only in tests",
		`w.yaml:10:7: routes.gearman[1]: matches only names with a '/': rule [0] (glob "*") takes every other name first`,
	}, "\n")
	if got := c.Warnings().Error(); got != want {
		t.Errorf("Warnings() =\n%s\nwant\n%s", got, want)
	}
}
