package config

import (
	"fmt"
	"math"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/tracing"
)

// Validate checks the whole configuration and returns every problem at once
// as [Errors], sorted by position, or nil. For a Config from [Load] or
// [Parse] each error names the file, line and column of the value at fault
// (or of the section a missing field belongs in); for a Config built in code
// only the path.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.gearman()
	v.beanstalk()
	v.admin()
	v.data()
	v.limits()
	v.log()
	v.tls()
	v.auth()
	v.tracing()
	v.backends()
	v.pools()
	v.routes()
	v.listeners()
	v.nonNegative("shutdown_timeout", c.ShutdownTimeout)
	v.oneOf("loop_wait", c.LoopWait, LoopWaitAuto, LoopWaitPark)
	if c.LoopSpin < 0 || c.LoopSpin > MaxLoopSpin {
		v.errorf("loop_spin", "%v is not between 0 and %v", c.LoopSpin, MaxLoopSpin)
	}
	return v.errs.err()
}

// Warnings returns what is allowed but probably a mistake or a risk: a
// secret written in the config, a TLS check turned off, auth that denies
// everything or is not enforced, a routing rule behind a catch-all. cmd
// should log them after a successful Load.
func (c *Config) Warnings() Errors {
	v := &validator{c: c}
	for i, id := range c.Auth.Identities {
		if id.Token != "" {
			v.errorf(fmt.Sprintf("auth.identities[%d].token", i), "a secret written in the config file; prefer tokens_file, readable only by jobgate")
		}
	}
	for i, b := range c.Backends {
		if b.TLS.InsecureSkipVerify {
			v.errorf(fmt.Sprintf("backends[%d].tls.insecure_skip_verify", i), "the server's certificate is not verified, so anyone on the path can impersonate it; use only in tests")
		}
	}
	switch {
	case c.Auth.Enabled && len(c.Auth.Rules) == 0:
		v.errorf("auth.enabled", "no rule grants anything, so every request is denied")
	case !c.Auth.Enabled && (len(c.Auth.Identities) > 0 || len(c.Auth.Rules) > 0):
		v.errorf("auth.enabled", "false, so the identities and rules below are not enforced")
	}
	for _, proto := range []string{TypeGearman, TypeBeanstalk} {
		for i, r := range c.routesOf(proto) {
			if r.Glob == "*" {
				for j := i + 1; j < len(c.routesOf(proto)); j++ {
					v.errorf(fmt.Sprintf("routes.%s[%d]", proto, j), "matches only names with a '/': rule [%d] (glob \"*\") takes every other name first", i)
				}
				break
			}
		}
	}
	v.errs.sort()
	return v.errs
}

// validator collects the errors of one Validate.
type validator struct {
	c    *Config
	errs Errors
}

func (v *validator) errorf(path, format string, args ...any) {
	file, line, col := v.c.src.locate(path)
	v.errs = append(v.errs, &FieldError{File: file, Line: line, Col: col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) nonNegative(path string, d time.Duration) {
	if d < 0 {
		v.errorf(path, "%v is negative", d)
	}
}

func (v *validator) atLeast(path string, n, lo int) {
	if n < lo {
		v.errorf(path, "%d is less than %d", n, lo)
	}
}

func (v *validator) sizeIn(path string, s, lo, hi Size) {
	if s < lo || s > hi {
		v.errorf(path, "%s is out of range: want %s to %s", s, lo, hi)
	}
}

// oneOf checks an enumerated string.
func (v *validator) oneOf(path, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	last := len(allowed) - 1
	v.errorf(path, "%q is not %s or %s", s, strings.Join(allowed[:last], ", "), allowed[last])
}

// listenAddr checks a listen address: host:port with an optional host and
// a numeric port, 0 to 65535.
func (v *validator) listenAddr(path, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.errorf(path, "%q is not host:port: %s", addr, addrErr(err))
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.errorf(path, "%q: port %q is not a number from 0 to 65535", addr, port)
	}
}

// dialAddr checks an upstream's address: a host and a port 1 to 65535.
func (v *validator) dialAddr(path, addr string) {
	host, port, err := net.SplitHostPort(addr)
	switch {
	case addr == "":
		v.errorf(path, "required: the upstream's host:port")
	case err != nil:
		v.errorf(path, "%q is not host:port: %s", addr, addrErr(err))
	case host == "":
		v.errorf(path, "%q has no host", addr)
	default:
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			v.errorf(path, "%q: port %q is not a number from 1 to 65535", addr, port)
		}
	}
}

// addrErr is the reason net.SplitHostPort gives, without the address it
// repeats.
func addrErr(err error) string {
	if ae, ok := err.(*net.AddrError); ok {
		return ae.Err
	}
	return err.Error()
}

// names are backend, pool and identity names.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (v *validator) name(path, name string) bool {
	switch {
	case name == "":
		v.errorf(path, "required")
	case !nameRE.MatchString(name):
		v.errorf(path, "%q is not a name: want up to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	default:
		return true
	}
	return false
}

// glob checks a path.Match pattern.
func (v *validator) glob(path, g string) {
	if g == "" {
		v.errorf(path, "empty pattern")
	} else if _, err := pathMatch(g, ""); err != nil {
		v.errorf(path, "%q is not a valid glob (path.Match syntax: *, ?, [a-z], \\ escapes)", g)
	}
}

// pathMatch is path.Match under a name the validators' path parameters do
// not shadow.
var pathMatch = path.Match

func (v *validator) gearman() {
	g := v.c.Gearman
	if g.Listen != "" {
		v.listenAddr("gearman.listen", g.Listen)
	}
	if g.TLSListen != "" {
		v.listenAddr("gearman.tls_listen", g.TLSListen)
	}
	v.sizeIn("gearman.max_packet_size", g.MaxPacketSize, 1, math.MaxUint32)
	v.sizeIn("gearman.max_admin_line", g.MaxAdminLine, 64, MiB)
	v.atLeast("gearman.job_retries", g.JobRetries, 0)
	switch {
	case len(g.HandlePrefix) > 32:
		v.errorf("gearman.handle_prefix", "%d bytes long: at most 32, so that handles stay within Gearman's 64", len(g.HandlePrefix))
	case strings.ContainsFunc(g.HandlePrefix, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		v.errorf("gearman.handle_prefix", "%q has a space or control character", g.HandlePrefix)
	}
}

func (v *validator) beanstalk() {
	b := v.c.Beanstalk
	if b.Listen != "" {
		v.listenAddr("beanstalk.listen", b.Listen)
	}
	if b.TLSListen != "" {
		v.listenAddr("beanstalk.tls_listen", b.TLSListen)
	}
	v.sizeIn("beanstalk.max_job_size", b.MaxJobSize, 1, GiB)
}

func (v *validator) admin() {
	if a := v.c.Admin; a.Listen != "" {
		v.listenAddr("admin.listen", a.Listen)
	}
	v.atLeast("admin.max_connections", v.c.Admin.MaxConnections, 0)
}

func (v *validator) data() {
	d := v.c.Data
	v.oneOf("data.fsync", d.Fsync, FsyncAlways, FsyncInterval, FsyncNever)
	if d.Fsync == FsyncInterval && d.FsyncInterval <= 0 {
		v.errorf("data.fsync_interval", "%v: the interval policy needs a period more than 0", d.FsyncInterval)
	} else {
		v.nonNegative("data.fsync_interval", d.FsyncInterval)
	}
}

func (v *validator) limits() {
	l := v.c.Limits
	v.atLeast("limits.max_connections", l.MaxConnections, 0)
	v.atLeast("limits.max_connections_per_ip", l.MaxConnectionsPerIP, 0)
	v.nonNegative("limits.idle_timeout", l.IdleTimeout)
	v.nonNegative("limits.read_timeout", l.ReadTimeout)
	v.nonNegative("limits.write_timeout", l.WriteTimeout)
	v.atLeast("limits.max_reserved_per_conn", l.MaxReservedPerConn, 0)
	if l.HandshakeTimeout <= 0 {
		v.errorf("limits.handshake_timeout", "%v is not more than 0", l.HandshakeTimeout)
	}
	v.atLeast("limits.max_handshakes", l.MaxHandshakes, 0)
	if l.WriteBufferLimit < 0 {
		v.errorf("limits.write_buffer_limit", "%s is negative", l.WriteBufferLimit)
	}
}

func (v *validator) log() {
	v.oneOf("log.level", v.c.Log.Level, LevelDebug, LevelInfo, LevelWarn, LevelError)
	v.oneOf("log.format", v.c.Log.Format, FormatText, FormatJSON)
}

func (v *validator) tls() {
	t := v.c.TLS
	for i, ck := range t.Certificates {
		p := fmt.Sprintf("tls.certificates[%d]", i)
		v.pair(p+".cert_file", ck.CertFile, p+".key_file", ck.KeyFile, true)
	}
	v.oneOf("tls.min_version", t.MinVersion, TLS12, TLS13)
	v.oneOf("tls.client_auth", t.ClientAuth, ClientAuthNone, ClientAuthRequest, ClientAuthRequire)
	switch {
	case (t.ClientAuth == ClientAuthRequest || t.ClientAuth == ClientAuthRequire) && t.ClientCAFile == "":
		v.errorf("tls.client_auth", "%q needs tls.client_ca_file to verify client certificates against", t.ClientAuth)
	case t.ClientAuth == ClientAuthNone && t.ClientCAFile != "":
		v.errorf("tls.client_ca_file", "set, but client_auth is none so no client certificate is asked for; set client_auth to request or require")
	}

	// Every TLS listener needs a certificate.
	hasCert := len(t.Certificates) > 0 || t.ACME.Enabled()
	for _, l := range []struct {
		path string
		on   bool
	}{
		{"gearman.tls_listen", v.c.Gearman.TLSListen != ""},
		{"beanstalk.tls_listen", v.c.Beanstalk.TLSListen != ""},
		{"admin.tls", v.c.Admin.TLS && v.c.Admin.Listen != ""},
	} {
		if l.on && !hasCert {
			v.errorf(l.path, "TLS needs a certificate: set tls.certificates or tls.acme.domains")
		}
	}
	v.acme()
}

// pair checks two files that go together, such as a certificate and its
// key; required says whether the pair must be set at all.
func (v *validator) pair(certPath, cert, keyPath, key string, required bool) {
	switch {
	case cert == "" && key == "" && required:
		v.errorf(certPath, "required, with %s", keyPath[strings.LastIndex(keyPath, ".")+1:])
		v.errorf(keyPath, "required, with %s", certPath[strings.LastIndex(certPath, ".")+1:])
	case cert == "" && key != "":
		v.errorf(certPath, "required when %s is set", keyPath[strings.LastIndex(keyPath, ".")+1:])
	case cert != "" && key == "":
		v.errorf(keyPath, "required when %s is set", certPath[strings.LastIndex(certPath, ".")+1:])
	}
}

// hostnameRE matches a DNS name: dot-separated labels of letters, digits
// and inner hyphens.
var hostnameRE = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$`)

func (v *validator) acme() {
	a := v.c.TLS.ACME
	if a.ChallengeListen != "" {
		v.listenAddr("tls.acme.challenge_listen", a.ChallengeListen)
	}
	if !a.Enabled() {
		for _, f := range []struct{ path, val string }{
			{"tls.acme.email", a.Email}, {"tls.acme.ca", a.CA}, {"tls.acme.ca_root_file", a.CARootFile},
		} {
			if f.val != "" {
				v.errorf(f.path, "set, but tls.acme.domains is empty, so ACME is off")
			}
		}
		return
	}
	seen := map[string]int{}
	for i, d := range a.Domains {
		p := fmt.Sprintf("tls.acme.domains[%d]", i)
		key := strings.ToLower(strings.TrimSuffix(d, "."))
		switch {
		case strings.HasPrefix(d, "*."):
			v.errorf(p, "%q: wildcard certificates need the DNS challenge, which jobgate does not offer", d)
		case len(d) > 253 || !hostnameRE.MatchString(d):
			v.errorf(p, "%q is not a domain name", d)
		default:
			if j, dup := seen[key]; dup {
				v.errorf(p, "%q is also domains[%d]", d, j)
			}
			seen[key] = i
		}
	}
	if a.Email != "" {
		if addr, err := mail.ParseAddress(a.Email); err != nil || addr.Address != a.Email {
			v.errorf("tls.acme.email", "%q is not an email address like ops@example.com", a.Email)
		}
	}
	if a.CA != "" {
		if u, err := url.Parse(a.CA); err != nil || u.Scheme != "https" || u.Host == "" {
			v.errorf("tls.acme.ca", "%q is not an https:// ACME directory URL", a.CA)
		}
	}
	if a.CARootFile != "" && a.CA == "" {
		v.errorf("tls.acme.ca_root_file", "set, but tls.acme.ca is empty: a private root is for a private CA's directory URL")
	}
}

func (v *validator) auth() {
	a := v.c.Auth
	if a.Enabled && len(a.Identities) == 0 {
		v.errorf("auth.enabled", "needs at least one identity in auth.identities")
	}
	if a.MaxBadTokens < 1 {
		v.errorf("auth.max_bad_tokens", "%d: want at least 1", a.MaxBadTokens)
	}
	ids := map[string]int{}
	for i, id := range a.Identities {
		p := fmt.Sprintf("auth.identities[%d]", i)
		if id.Name == "*" {
			v.errorf(p+".name", `"*" is reserved: in rules it means any authenticated client`)
		} else if v.name(p+".name", id.Name) {
			if j, dup := ids[id.Name]; dup {
				v.errorf(p+".name", "%q is also identities[%d]", id.Name, j)
			} else {
				ids[id.Name] = i
			}
		}
		if len(id.CertNames) == 0 && len(id.CIDRs) == 0 && id.TokensFile == "" && id.Token == "" {
			v.errorf(p, "matches no client: set cert_names, cidrs, tokens_file or token")
		}
		if id.Token != "" && id.TokensFile != "" {
			v.errorf(p+".token", "set with tokens_file: use one of them")
		}
		if len(id.CertNames) > 0 && v.c.TLS.ClientAuth != ClientAuthRequest && v.c.TLS.ClientAuth != ClientAuthRequire {
			v.errorf(p+".cert_names", "need client certificates: set tls.client_auth to request or require")
		}
		for j, cn := range id.CertNames {
			if strings.TrimSpace(cn) == "" {
				v.errorf(fmt.Sprintf("%s.cert_names[%d]", p, j), "empty name")
			}
		}
		for j, cidr := range id.CIDRs {
			v.cidr(fmt.Sprintf("%s.cidrs[%d]", p, j), cidr)
		}
	}
	for i, r := range a.Rules {
		p := fmt.Sprintf("auth.rules[%d]", i)
		if _, ok := ids[r.Identity]; !ok && r.Identity != "*" {
			if r.Identity == "" {
				v.errorf(p+".identity", `required: an identity's name, or "*" for any authenticated client`)
			} else {
				v.errorf(p+".identity", "%q is not an identity in auth.identities", r.Identity)
			}
		}
		for j, g := range r.Produce {
			v.glob(fmt.Sprintf("%s.produce[%d]", p, j), g)
		}
		for j, g := range r.Consume {
			v.glob(fmt.Sprintf("%s.consume[%d]", p, j), g)
		}
	}
}

func (v *validator) cidr(path, s string) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		hint := ""
		if a, err := netip.ParseAddr(s); err == nil {
			hint = fmt.Sprintf(" (for one address, %s/%d)", a, a.BitLen())
		}
		v.errorf(path, "%q is not a CIDR prefix like 10.1.0.0/16%s", s, hint)
	case p.Masked() != p:
		v.errorf(path, "%q has bits set past the prefix length; did you mean %s?", s, p.Masked())
	}
}

// tracing checks what tracing.Config.WithEnv would reject in the fields a
// file sets; values from the environment are checked when tracing starts.
func (v *validator) tracing() {
	t := v.c.Tracing
	if t.Endpoint != "" {
		s := t.Endpoint
		if !strings.Contains(s, "://") {
			s = "https://" + s
		}
		if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errorf("tracing.endpoint", "%q is not an http:// or https:// URL with a host", t.Endpoint)
		}
	}
	if t.Protocol != "" {
		v.oneOf("tracing.protocol", t.Protocol, tracing.ProtocolGRPC, tracing.ProtocolHTTPProtobuf)
	}
	if t.Sampler != "" {
		v.oneOf("tracing.sampler", t.Sampler,
			tracing.SamplerAlwaysOn, tracing.SamplerAlwaysOff, tracing.SamplerTraceIDRatio,
			tracing.SamplerParentBasedAlwaysOn, tracing.SamplerParentBasedAlwaysOff, tracing.SamplerParentBasedTraceIDRatio)
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 || math.IsNaN(t.SampleRatio) {
		v.errorf("tracing.sample_ratio", "%v is not in (0, 1] (0 means unset)", t.SampleRatio)
	}
	v.atLeast("tracing.queue_size", t.QueueSize, 0)
	v.atLeast("tracing.table_size", t.TableSize, 0)
}
