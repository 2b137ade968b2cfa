// Package config is jobgate's configuration: the YAML file format, the
// defaults ([Default]), loading ([Load], [Parse]) and validation
// ([Config.Validate]).
//
// A configuration file overlays the defaults: a field the file leaves out
// keeps its default, a list the file sets replaces the default list, and a
// section written with no value (`tls:` alone) keeps its defaults. Unknown
// fields are errors. Durations are Go duration strings ("50ms", "2s",
// "1h30m"); sizes are integers (bytes) or integers with a unit ("64MiB",
// "8KiB", "1GB"; see [Size]).
//
// Every problem in a file is reported at once: Load and Parse return
// [Errors], a list of [*FieldError] sorted by position, each printing as
// "file:line:col: path: message". The path names the field in the file's own
// terms, e.g. "backends[1].address" or "routes.gearman[0].glob".
//
// Command-line flags win over the file. The intended order for cmd is:
// Load the file (or start from [Default] when there is none), apply every
// flag the user actually set with [Config.Set] (or by assigning fields), then
// call [Config.Validate] again. [Config.IsSet] says whether the file set a
// field, for callers that need to tell a default from an explicit value.
//
// This package reads files and checks values; it opens no listeners, reads
// no certificates and dials nothing.
package config

import (
	"time"

	"github.com/jobgate/jobgate/tracing"
)

// Config is a whole jobgate configuration. Build one with [Default],
// [Load], [Parse] or [Upstreams]; a Config built by hand should start from
// Default too, since the zero values of several fields are invalid.
type Config struct {
	// Gearman configures the Gearman listeners and the local Gearman engine.
	Gearman Gearman `yaml:"gearman"`
	// Beanstalk configures the Beanstalk listeners and the local Beanstalk
	// engine.
	Beanstalk Beanstalk `yaml:"beanstalk"`
	// Admin configures the admin HTTP server (/healthz, /readyz, /metrics).
	Admin Admin `yaml:"admin"`
	// Data configures the local engines' journal.
	Data Data `yaml:"data"`
	// Limits bounds what clients may use, on every listener.
	Limits Limits `yaml:"limits"`
	// Log configures jobgate's own log.
	Log Log `yaml:"log"`
	// TLS holds the server certificates and client-certificate policy used by
	// every TLS listener (gearman.tls_listen, beanstalk.tls_listen, and the
	// admin server when admin.tls is true).
	TLS TLS `yaml:"tls"`
	// Auth says who may produce, consume and administer which names.
	Auth Auth `yaml:"auth"`
	// Tracing configures OpenTelemetry trace export; see [tracing.Config]
	// for each field and for how the OTEL_* environment variables fill the
	// fields left empty. Its defaults are all zero on purpose, so that the
	// environment can supply them.
	Tracing tracing.Config `yaml:"tracing"`
	// Backends are the servers jobs are routed to. A backend named "local"
	// (id 0, type local: the in-process engines) always exists, declared or
	// not; see [Config.AllBackends].
	Backends []Backend `yaml:"backends"`
	// Pools group backends of one protocol so that names are spread over
	// them (shard) or fail over between them (failover).
	Pools []Pool `yaml:"pools"`
	// Routes map Gearman function names and Beanstalk tube names to a pool
	// or backend.
	Routes Routes `yaml:"routes"`
	// ShutdownTimeout (shutdown_timeout) is how long a drain (SIGTERM,
	// SIGINT) waits for the jobs in hand to finish before closing the
	// connections. Default 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// LoopWait (loop_wait) is how the event loops (Linux) wait when no
	// socket is ready: LoopWaitAuto (the default) blocks in epoll_pwait,
	// or parks on the Go runtime's netpoller when the process has one CPU;
	// LoopWaitPark always parks. Parking shortens the latency tail on two
	// or more CPUs when the loops are busy with many connections, and
	// costs CPU when they wait for every request (docs/BENCHMARKS.md,
	// "Tail latency on two CPUs").
	LoopWait string `yaml:"loop_wait"`
	// LoopSpin (loop_spin) is how long an event loop (Linux, more than one
	// CPU) keeps polling its sockets before it blocks when none is ready,
	// while its waits bring one event at a time. A request that comes
	// meanwhile needs no wake-up: faster and a lower tail for clients that
	// send one request at a time, paid with the CPU the polling takes,
	// which a gateway sharing its CPUs with its upstream servers misses
	// (docs/BENCHMARKS.md, "Spinning before the loop sleeps"). Default
	// DefaultLoopSpin, which [Config.EventLoopSpin] drops to 0 when an
	// upstream's address is a loopback one; 0 blocks at once; at most
	// MaxLoopSpin.
	LoopSpin time.Duration `yaml:"loop_spin"`
	// IOUring (io_uring) makes the event loops (Linux) read every socket
	// epoll reports ready with one io_uring_enter system call, and write
	// every connection with output with another, instead of one system
	// call per read and write; where the kernel refuses io_uring they make
	// the plain calls. false: always the plain calls. Default true.
	IOUring bool `yaml:"io_uring"`

	// src records where each field came from; nil for a Config built in
	// code. Copies of a Config share it; Set replaces it rather than
	// changing it.
	src *source
}

// Bounds of Config.LoopSpin.
const (
	// DefaultLoopSpin is a little longer than one put's round trip over
	// loopback here, so a client that sends its next request on the
	// reply finds the loop still polling.
	DefaultLoopSpin = 30 * time.Microsecond
	// MaxLoopSpin: a loop that polls for longer than this between
	// requests is better served by blocking.
	MaxLoopSpin = time.Millisecond
)

// The values of Config.LoopWait.
const (
	LoopWaitAuto = "auto"
	LoopWaitPark = "park"
)

// Gearman configures the Gearman side of jobgate.
type Gearman struct {
	// Listen (gearman.listen) is the plain-TCP Gearman listen address,
	// host:port. Empty disables it. Default ":4730".
	Listen string `yaml:"listen"`
	// TLSListen (gearman.tls_listen) is the Gearman-over-TLS listen address,
	// on its own port; it uses the tls section. Empty (the default)
	// disables it.
	TLSListen string `yaml:"tls_listen"`
	// MaxPacketSize (gearman.max_packet_size) is the largest packet body
	// accepted from clients and upstream servers, 1 byte to 4GiB-1 (the
	// protocol's length field is 32 bits). Default 64MiB.
	MaxPacketSize Size `yaml:"max_packet_size"`
	// MaxAdminLine (gearman.max_admin_line) is the longest text admin
	// command line accepted, counting its newline; at least 64 bytes.
	// Default 8KiB, as gearmand.
	MaxAdminLine Size `yaml:"max_admin_line"`
	// JobRetries (gearman.job_retries) removes a job after this many failed
	// runs (worker gone, CANT_DO, timeout), like gearmand --job-retries.
	// 0 (the default) means no limit.
	JobRetries int `yaml:"job_retries"`
	// HandlePrefix (gearman.handle_prefix) starts every job handle of the
	// local engine ("<prefix>:<n>"), like gearmand --job-handle-prefix; at
	// most 32 bytes, no spaces or NULs. Empty (the default) means
	// "H:<hostname>".
	HandlePrefix string `yaml:"handle_prefix"`
	// Exceptions (gearman.exceptions) forwards WORK_EXCEPTION to every
	// client as if each had set the "exceptions" option, like gearmand
	// --exceptions. Default false.
	Exceptions bool `yaml:"exceptions"`
	// AdminShutdown (gearman.admin_shutdown) lets the text admin commands
	// "shutdown" and "shutdown graceful" stop jobgate. Default false.
	AdminShutdown bool `yaml:"admin_shutdown"`
}

// Beanstalk configures the Beanstalk side of jobgate.
type Beanstalk struct {
	// Listen (beanstalk.listen) is the plain-TCP Beanstalk listen address,
	// host:port. Empty disables it. Default ":11300".
	Listen string `yaml:"listen"`
	// TLSListen (beanstalk.tls_listen) is the Beanstalk-over-TLS listen
	// address, on its own port; it uses the tls section. Empty (the
	// default) disables it.
	TLSListen string `yaml:"tls_listen"`
	// MaxJobSize (beanstalk.max_job_size) is the largest job body, like
	// beanstalkd -z: 1 byte to 1GiB. Default 65535.
	MaxJobSize Size `yaml:"max_job_size"`
	// QuoteStats (beanstalk.quote_stats) quotes string values in stats
	// YAML as beanstalkd 1.13 does (1.12 does not). Default false.
	QuoteStats bool `yaml:"quote_stats"`
}

// Admin configures the admin HTTP server.
type Admin struct {
	// Listen (admin.listen) is the admin HTTP listen address, serving
	// /healthz, /readyz and /metrics. Empty disables it. Default
	// "127.0.0.1:9090".
	Listen string `yaml:"listen"`
	// TLS (admin.tls) serves the admin server over TLS with the tls
	// section's certificates and client-certificate policy. Default false.
	TLS bool `yaml:"tls"`
	// MaxConnections (admin.max_connections) caps concurrent admin
	// connections, TLS handshakes included; past it a new connection is
	// closed at once. 0 means no cap. Default 64: a scraper and a few
	// operators need far fewer, and the protocol listeners' caps do not
	// cover this port.
	MaxConnections int `yaml:"max_connections"`
}

// Fsync policies for [Data.Fsync], as beanstalkd's -f.
const (
	// FsyncAlways acknowledges a write only after an fsync covering it.
	FsyncAlways = "always"
	// FsyncInterval acknowledges after the write and fsyncs every
	// fsync_interval.
	FsyncInterval = "interval"
	// FsyncNever leaves flushing to the operating system.
	FsyncNever = "never"
)

// Data configures persistence of the local engines.
type Data struct {
	// Dir (data.dir) is the journal directory. Empty disables persistence:
	// jobs live in memory only. Default "./jobgate-data".
	Dir string `yaml:"dir"`
	// Fsync (data.fsync) is when the journal is flushed to disk: "always"
	// (before each acknowledgement), "interval" (every fsync_interval) or
	// "never" (left to the OS). Default "interval".
	Fsync string `yaml:"fsync"`
	// FsyncInterval (data.fsync_interval) is the period of the "interval"
	// policy, more than 0. Default 50ms.
	FsyncInterval time.Duration `yaml:"fsync_interval"`
}

// Limits bounds client connections on every listener. A zero value means no
// limit unless said otherwise.
type Limits struct {
	// MaxConnections (limits.max_connections) caps concurrent client
	// connections, on all listeners together; 0 means no limit. Default
	// 10000.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP (limits.max_connections_per_ip) caps concurrent
	// connections from one source address; 0 (the default) means no limit.
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
	// IdleTimeout (limits.idle_timeout) closes a connection that sent no
	// request for this long and has nothing pending; 0 (the default) means
	// never. A worker blocked in reserve or asleep after PRE_SLEEP, or
	// holding a job, and a client awaiting a foreground job are not idle.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ReadTimeout (limits.read_timeout) closes a connection that takes
	// longer than this to send the rest of a started request; 0 (the
	// default) means no limit.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout (limits.write_timeout) closes a connection whose output
	// makes no progress for this long; 0 means no limit. Default 30s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxReservedPerConn (limits.max_reserved_per_conn) caps the jobs one
	// connection may hold reserved (Beanstalk) or assigned (Gearman); 0
	// (the default) means no limit.
	MaxReservedPerConn int `yaml:"max_reserved_per_conn"`
	// WriteBufferLimit (limits.write_buffer_limit) is how much output may
	// queue for a client that stops reading before it is cut off; 0 means
	// no limit. Default 16MiB.
	WriteBufferLimit Size `yaml:"write_buffer_limit"`
	// HandshakeTimeout (limits.handshake_timeout) bounds the TLS handshake
	// of a client on a TLS listener, so a silent or slow client cannot hold
	// a connection slot and a goroutine for long; more than 0. Default 10s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// MaxHandshakes (limits.max_handshakes) caps the TLS handshakes in
	// progress on each TLS listener; past it a new connection is closed at
	// once, before any TLS work. 0 means no limit. Default 1000.
	MaxHandshakes int `yaml:"max_handshakes"`
}

// Log levels and formats for [Log].
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"

	FormatText = "text"
	FormatJSON = "json"
)

// Log configures jobgate's log, written to standard error.
type Log struct {
	// Level (log.level) is the least severe level logged: "debug", "info",
	// "warn" or "error". Default "info".
	Level string `yaml:"level"`
	// Format (log.format) is "text" (logfmt-like key=value) or "json".
	// Default "text".
	Format string `yaml:"format"`
}

// TLS versions and client-certificate policies for [TLS].
const (
	TLS12 = "1.2"
	TLS13 = "1.3"

	// ClientAuthNone asks for no client certificate.
	ClientAuthNone = "none"
	// ClientAuthRequest asks for a client certificate and verifies it
	// against client_ca_file when one is sent; a client without one is
	// still served (as an unauthenticated or CIDR-identified client).
	ClientAuthRequest = "request"
	// ClientAuthRequire refuses a TLS client without a certificate that
	// verifies against client_ca_file.
	ClientAuthRequire = "require"
)

// TLS holds the server side of TLS, shared by every TLS listener.
type TLS struct {
	// Certificates (tls.certificates) are PEM certificate/key file pairs,
	// reloaded when the files change. The certificate is chosen by SNI.
	Certificates []CertKey `yaml:"certificates"`
	// ACME (tls.acme) obtains and renews certificates automatically.
	ACME ACME `yaml:"acme"`
	// MinVersion (tls.min_version) is the oldest TLS version accepted:
	// "1.2" or "1.3". Default "1.2".
	MinVersion string `yaml:"min_version"`
	// ClientCAFile (tls.client_ca_file) is a PEM bundle of the CAs that
	// client certificates must chain to. Needed when client_auth is request
	// or require.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth (tls.client_auth) is the client-certificate policy:
	// "none", "request" (verify a certificate if the client sends one) or
	// "require" (refuse clients without a valid one). Default "none".
	ClientAuth string `yaml:"client_auth"`
}

// CertKey is one certificate and its private key, both PEM files.
type CertKey struct {
	// CertFile (tls.certificates[].cert_file) is the PEM certificate chain,
	// leaf first.
	CertFile string `yaml:"cert_file"`
	// KeyFile (tls.certificates[].key_file) is the PEM private key of
	// CertFile's leaf.
	KeyFile string `yaml:"key_file"`
}

// ACME configures automatic certificates (certmagic). It is on when Domains
// is not empty.
type ACME struct {
	// Domains (tls.acme.domains) are the names to obtain certificates for;
	// "*.example.com" wildcards need a DNS challenge, which jobgate does
	// not offer, so they are refused. Empty (the default) turns ACME off.
	Domains []string `yaml:"domains"`
	// Email (tls.acme.email) is the ACME account's contact address, as
	// "user@example.com". Optional but recommended: the CA warns it before
	// certificates expire.
	Email string `yaml:"email"`
	// CA (tls.acme.ca) is the ACME directory URL. Empty (the default) means
	// Let's Encrypt production.
	CA string `yaml:"ca"`
	// CARootFile (tls.acme.ca_root_file) is a PEM root to trust when
	// talking to a private ACME CA set in ca.
	CARootFile string `yaml:"ca_root_file"`
	// ChallengeListen (tls.acme.challenge_listen) is where the HTTP-01
	// challenge is answered; empty disables HTTP-01 and leaves TLS-ALPN-01,
	// answered on the TLS listeners. Default ":80".
	ChallengeListen string `yaml:"challenge_listen"`
}

// Enabled reports whether ACME is on, that is whether any domain is set.
func (a ACME) Enabled() bool { return len(a.Domains) > 0 }

// Auth configures authentication and authorization. Off by default: anyone
// may do anything.
type Auth struct {
	// Enabled (auth.enabled) turns authorization on; then whatever no rule
	// allows is denied. Default false.
	Enabled bool `yaml:"enabled"`
	// Identities (auth.identities) say how a client is recognised.
	Identities []Identity `yaml:"identities"`
	// Rules (auth.rules) grant identities the right to produce, consume or
	// administer. Rules add up; nothing is denied explicitly.
	Rules []Rule `yaml:"rules"`
	// MaxBadTokens (auth.max_bad_tokens) is how many unknown tokens a
	// connection may send before it is closed, a brake on guessing.
	// Default 3.
	MaxBadTokens int `yaml:"max_bad_tokens"`
}

// Identity is one named kind of client. A client is the first identity, in
// file order, that matches it by certificate name, source address or token.
type Identity struct {
	// Name (auth.identities[].name) names the identity in rules and logs.
	Name string `yaml:"name"`
	// CertNames (auth.identities[].cert_names) match a verified client
	// certificate's subject common name or any DNS SAN. Needs
	// tls.client_auth request or require.
	CertNames []string `yaml:"cert_names"`
	// CIDRs (auth.identities[].cidrs) match clients by source address,
	// e.g. "10.1.0.0/16" or "2001:db8::/32" ("10.1.2.3/32" for one host).
	CIDRs []string `yaml:"cidrs"`
	// TokensFile (auth.identities[].tokens_file) is a file of secret
	// tokens, one per line, any of which identifies a client.
	TokensFile string `yaml:"tokens_file"`
	// Token (auth.identities[].token) is one secret token written in the
	// config itself. Prefer tokens_file: a token here is reported by
	// [Config.Warnings]. At most one of token and tokens_file.
	Token string `yaml:"token"`
}

// Rule grants rights to an identity.
type Rule struct {
	// Identity (auth.rules[].identity) is the identity granted, or "*" for
	// any authenticated client.
	Identity string `yaml:"identity"`
	// Produce (auth.rules[].produce) are globs (path.Match syntax) over the
	// Gearman functions a client may submit to and the Beanstalk tubes it
	// may put into.
	Produce []string `yaml:"produce"`
	// Consume (auth.rules[].consume) are globs over the functions a client
	// may work on (CAN_DO) and the tubes it may watch and reserve from,
	// peek, kick or delete in.
	Consume []string `yaml:"consume"`
	// Admin (auth.rules[].admin) allows the server-wide commands: Gearman
	// text admin commands, Beanstalk stats, list-tubes, pause-tube.
	Admin bool `yaml:"admin"`
}

// Backend types.
const (
	// TypeLocal is the in-process engines; it serves both protocols.
	TypeLocal = "local"
	// TypeGearman is an upstream gearmand.
	TypeGearman = "gearman"
	// TypeBeanstalk is an upstream beanstalkd.
	TypeBeanstalk = "beanstalk"
)

// LocalName is the name of the local backend, and LocalID its id.
const (
	LocalName = "local"
	LocalID   = 0
	// MaxBackendID is the largest backend id: ids are encoded in 10 bits
	// of client-visible job ids and handles.
	MaxBackendID = 1023
)

// Backend is one server jobs can be routed to.
type Backend struct {
	// Name (backends[].name) names the backend in pools and routes; unique
	// across backends and pools. Letters, digits, '.', '_' and '-'.
	Name string `yaml:"name"`
	// ID (backends[].id) is encoded in the job ids and handles clients
	// see, so it must never change while jobs exist: 1 to 1023, unique. 0
	// is the local backend's.
	ID int `yaml:"id"`
	// Type (backends[].type) is "gearman" (an upstream gearmand),
	// "beanstalk" (an upstream beanstalkd) or "local" (only for the
	// backend named local).
	Type string `yaml:"type"`
	// Address (backends[].address) is the upstream's host:port.
	Address string `yaml:"address"`
	// DialTimeout (backends[].dial_timeout) bounds connecting, TLS
	// handshake included. Default 2s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// IOTimeout (backends[].io_timeout) bounds waiting for a reply to a
	// request that should be answered at once (not a blocking reserve or
	// a job's run); 0 means no limit. Default 30s.
	IOTimeout time.Duration `yaml:"io_timeout"`
	// Keepalive (backends[].keepalive) is the TCP keepalive period; 0 uses
	// the system default. Default 30s.
	Keepalive time.Duration `yaml:"keepalive"`
	// HealthInterval (backends[].health_interval) is the period of health
	// checks (Gearman ECHO, Beanstalk stats); 0 disables them. Default 5s.
	HealthInterval time.Duration `yaml:"health_interval"`
	// TLS (backends[].tls) configures TLS to the upstream.
	TLS ClientTLS `yaml:"tls"`
	// Breaker (backends[].breaker) stops sending to a failing upstream.
	Breaker Breaker `yaml:"breaker"`
}

// ClientTLS is TLS from jobgate to an upstream server.
type ClientTLS struct {
	// Enabled (backends[].tls.enabled) connects with TLS. Default false.
	Enabled bool `yaml:"enabled"`
	// CAFile (backends[].tls.ca_file) is a PEM bundle of the CAs to trust;
	// empty means the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile (backends[].tls.cert_file) is a PEM client certificate to
	// present; set with key_file.
	CertFile string `yaml:"cert_file"`
	// KeyFile (backends[].tls.key_file) is CertFile's PEM private key.
	KeyFile string `yaml:"key_file"`
	// ServerName (backends[].tls.server_name) is the name to verify the
	// server's certificate against; empty means the address's host.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify (backends[].tls.insecure_skip_verify) accepts any
	// server certificate. For tests only; reported by [Config.Warnings].
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Breaker is a circuit breaker: after Failures consecutive failures the
// backend is skipped for OpenTimeout, then HalfOpenRequests trial requests
// decide whether it is back.
type Breaker struct {
	// Failures (backends[].breaker.failures) is how many consecutive
	// failures open the breaker; 0 disables it. Default 5.
	Failures int `yaml:"failures"`
	// OpenTimeout (backends[].breaker.open_timeout) is how long an open
	// breaker stays open before trial requests; more than 0 when failures
	// is set. Default 30s.
	OpenTimeout time.Duration `yaml:"open_timeout"`
	// HalfOpenRequests (backends[].breaker.half_open_requests) is how many
	// trial requests may be in flight while half open; at least 1 when
	// failures is set. Default 1.
	HalfOpenRequests int `yaml:"half_open_requests"`
}

// Pool strategies.
const (
	// StrategySingle sends everything to the pool's only backend.
	StrategySingle = "single"
	// StrategyShard spreads names over the backends by rendezvous hashing
	// of the name, so adding a backend moves about 1/n of the names.
	StrategyShard = "shard"
	// StrategyFailover sends everything to the first healthy backend, in
	// the pool's order.
	StrategyFailover = "failover"
)

// Pool is a group of backends of one protocol.
type Pool struct {
	// Name (pools[].name) names the pool in routes; unique across backends
	// and pools.
	Name string `yaml:"name"`
	// Strategy (pools[].strategy) is "single", "shard" or "failover".
	// Default "shard".
	Strategy string `yaml:"strategy"`
	// Backends (pools[].backends) are the member backends' names, at least
	// one, all gearman or all beanstalk ("local" serves both).
	Backends []string `yaml:"backends"`
}

// Routes map names to pools or backends, per protocol.
type Routes struct {
	// Gearman (routes.gearman) are the rules for function names, tried in
	// order; the first match wins.
	Gearman []Route `yaml:"gearman"`
	// Beanstalk (routes.beanstalk) are the rules for tube names, tried in
	// order; the first match wins.
	Beanstalk []Route `yaml:"beanstalk"`
	// GearmanDefault (routes.gearman_default) is the pool or backend for
	// functions no rule matches. Default "local".
	GearmanDefault string `yaml:"gearman_default"`
	// BeanstalkDefault (routes.beanstalk_default) is the pool or backend
	// for tubes no rule matches. Default "local".
	BeanstalkDefault string `yaml:"beanstalk_default"`
}

// Route is one routing rule: exactly one matcher (Exact, Prefix or Glob)
// and exactly one target (Pool or Backend).
type Route struct {
	// Exact (routes.*[].exact) matches one name.
	Exact string `yaml:"exact"`
	// Prefix (routes.*[].prefix) matches names starting with it.
	Prefix string `yaml:"prefix"`
	// Glob (routes.*[].glob) matches names by path.Match syntax: "*" any
	// run of characters but '/', "?" one such character, "[a-z]" a class,
	// "\\" an escape.
	Glob string `yaml:"glob"`
	// Pool (routes.*[].pool) is the target pool's name.
	Pool string `yaml:"pool"`
	// Backend (routes.*[].backend) is the target backend's name.
	Backend string `yaml:"backend"`
}

// Target returns the rule's pool or backend name, whichever is set.
func (r Route) Target() string {
	if r.Pool != "" {
		return r.Pool
	}
	return r.Backend
}

// AllBackends returns the configured backends with the implicit local
// backend first when the file does not declare it.
func (c *Config) AllBackends() []Backend {
	for _, b := range c.Backends {
		if b.Name == LocalName {
			return append([]Backend(nil), c.Backends...)
		}
	}
	return append([]Backend{LocalBackend()}, c.Backends...)
}

// Backend returns the backend named name, the implicit local one included.
func (c *Config) Backend(name string) (Backend, bool) {
	for _, b := range c.AllBackends() {
		if b.Name == name {
			return b, true
		}
	}
	return Backend{}, false
}

// Pool returns the pool named name.
func (c *Config) Pool(name string) (Pool, bool) {
	for _, p := range c.Pools {
		if p.Name == name {
			return p, true
		}
	}
	return Pool{}, false
}

// Serves reports whether a backend of type typ serves protocol proto
// (TypeGearman or TypeBeanstalk): local serves both, an upstream its own.
func Serves(typ, proto string) bool {
	return typ == TypeLocal || typ == proto
}
