package auth

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/jobgate/jobgate/config"
)

// Method says how a client was identified.
type Method uint8

// Identification methods, in the order a Peer's evidence is described.
const (
	// MethodNone: the client matched no identity (anonymous).
	MethodNone Method = iota
	// MethodCert: a verified client certificate's CN or DNS SAN.
	MethodCert
	// MethodCIDR: the client's source address.
	MethodCIDR
	// MethodToken: a shared-secret token the client sent.
	MethodToken
)

var methodNames = [...]string{"none", "cert", "cidr", "token"}

// String returns "none", "cert", "cidr" or "token".
func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return "Method(" + fmt.Sprint(uint8(m)) + ")"
}

// Identity is who a client is: one of the configured identities, or
// anonymous (the zero value). It is a small value, cheap to copy and to
// keep in every session. It belongs to the Policy whose Identify returned
// it: when the config is reloaded into a new Policy, identify every session
// again (the new Policy denies the old identities).
type Identity struct {
	p   *principal
	via Method
}

// Anonymous is the identity of a client no configured identity matches.
var Anonymous Identity

// Name returns the configured identity's name, or "" for anonymous.
func (id Identity) Name() string {
	if id.p == nil {
		return ""
	}
	return id.p.name
}

// Authenticated reports whether a configured identity matched the client.
func (id Identity) Authenticated() bool { return id.p != nil }

// Method says how the identity was established.
func (id Identity) Method() Method { return id.via }

// String returns the name, or "anonymous".
func (id Identity) String() string {
	if id.p == nil {
		return "anonymous"
	}
	return id.p.name
}

// LogValue makes an Identity log as a group "name=... method=...", so that
// every log line about a client says who it is and how we know.
func (id Identity) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", id.String()), slog.String("method", id.via.String()))
}

// Peer is the evidence about a client that identification looks at.
type Peer struct {
	// Addr is the client's source address. An IPv4-mapped IPv6 address is
	// treated as IPv4.
	Addr netip.Addr
	// Cert is the client's leaf certificate, only if the TLS handshake
	// verified it against the configured client CAs; nil otherwise. Never
	// pass an unverified certificate.
	Cert *x509.Certificate
	// Token is a token the client sent, or nil.
	Token []byte
}

// PeerOf builds the connection-time evidence: the source address of remote
// (a *net.TCPAddr, or anything whose String is ip:port) and, when cs is
// not nil, the leaf of its first verified chain (never an unverified
// certificate). Call it after the TLS handshake; cs is nil for plain TCP.
func PeerOf(remote net.Addr, cs *tls.ConnectionState) Peer {
	var p Peer
	switch a := remote.(type) {
	case *net.TCPAddr:
		p.Addr = a.AddrPort().Addr().Unmap()
	case nil:
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			p.Addr = ap.Addr().Unmap()
		}
	}
	if cs != nil && len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 {
		p.Cert = cs.VerifiedChains[0][0]
	}
	return p
}

// principal is one configured identity, compiled.
type principal struct {
	policy    *Policy // the Policy it belongs to, so Decide can refuse another's
	name      string
	index     int
	certNames []string // exact CNs / DNS SANs
	cidrs     []netip.Prefix
	tokens    map[[sha256.Size]byte]struct{}

	produce, consume globSet
	admin            bool
}

// Policy is the compiled auth configuration. It is immutable after New and
// safe for concurrent use.
type Policy struct {
	enabled    bool
	principals []*principal
	// tokens holds the SHA-256 of every token. Tokens are compared by
	// hash so that a lookup's timing depends on the hash, not on how many
	// leading bytes of a real token an attacker guessed.
	tokens map[[sha256.Size]byte]struct{}
}

// Token length limits; see the package documentation for the alphabet.
const (
	// MinTokenLen is the shortest token accepted: shorter is guessable.
	MinTokenLen = 16
	// MaxTokenLen is the longest token accepted; it leaves room for the
	// "jobgate-auth." prefix in a 200-byte Beanstalk tube name.
	MaxTokenLen = 128
)

// New compiles cfg, reading every identity's tokens_file. cfg should have
// passed config.Validate; New still reports what it cannot use (unreadable
// token files, bad tokens, bad CIDRs or globs), all at once.
func New(cfg config.Auth) (*Policy, error) {
	p := &Policy{enabled: cfg.Enabled, tokens: map[[sha256.Size]byte]struct{}{}}
	var errs []error
	byName := map[string]*principal{}
	for i, ci := range cfg.Identities {
		pr := &principal{policy: p, name: ci.Name, index: i, tokens: map[[sha256.Size]byte]struct{}{}}
		for _, cn := range ci.CertNames {
			pr.certNames = append(pr.certNames, strings.TrimSpace(cn))
		}
		for _, s := range ci.CIDRs {
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("auth.identities[%d].cidrs: %w", i, err))
				continue
			}
			pr.cidrs = append(pr.cidrs, pfx.Masked())
		}
		var toks []string
		if ci.Token != "" {
			toks = append(toks, ci.Token)
		}
		if ci.TokensFile != "" {
			ft, err := readTokens(ci.TokensFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("auth.identities[%d].tokens_file: %w", i, err))
			}
			toks = append(toks, ft...)
		}
		for _, t := range toks {
			if err := checkToken(t); err != nil {
				errs = append(errs, fmt.Errorf("auth.identities[%d] (%s): token: %w", i, ci.Name, err))
				continue
			}
			h := sha256.Sum256([]byte(t))
			pr.tokens[h] = struct{}{}
			p.tokens[h] = struct{}{}
		}
		p.principals = append(p.principals, pr)
		byName[ci.Name] = pr
	}
	for i, r := range cfg.Rules {
		var targets []*principal
		if r.Identity == "*" {
			targets = p.principals
		} else if pr, ok := byName[r.Identity]; ok {
			targets = []*principal{pr}
		} else {
			errs = append(errs, fmt.Errorf("auth.rules[%d].identity: %q is not an identity", i, r.Identity))
			continue
		}
		for _, pr := range targets {
			if err := pr.produce.add(r.Produce...); err != nil {
				errs = append(errs, fmt.Errorf("auth.rules[%d].produce: %w", i, err))
			}
			if err := pr.consume.add(r.Consume...); err != nil {
				errs = append(errs, fmt.Errorf("auth.rules[%d].consume: %w", i, err))
			}
			pr.admin = pr.admin || r.Admin
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Enabled reports whether authorization is enforced. When it is not,
// Decide allows everything, but Identify still names clients for logs.
func (p *Policy) Enabled() bool { return p != nil && p.enabled }

// Identify returns the first identity, in config order, that peer matches
// by certificate name, source address or token, or Anonymous. Call it when
// a connection is accepted, and again with Token set when the client sends
// a token. A nil Policy identifies nobody.
func (p *Policy) Identify(peer Peer) Identity {
	if p == nil {
		return Anonymous
	}
	addr := peer.Addr.Unmap()
	var tok [sha256.Size]byte
	hasTok := peer.Token != nil
	if hasTok {
		tok = sha256.Sum256(peer.Token)
	}
	for _, pr := range p.principals {
		if peer.Cert != nil && pr.matchCert(peer.Cert) {
			return Identity{pr, MethodCert}
		}
		if addr.IsValid() {
			for _, pfx := range pr.cidrs {
				if pfx.Contains(addr) {
					return Identity{pr, MethodCIDR}
				}
			}
		}
		if hasTok {
			if _, ok := pr.tokens[tok]; ok {
				return Identity{pr, MethodToken}
			}
		}
	}
	return Anonymous
}

// CheckToken reports whether token belongs to any identity: the proxy's
// answer to a token command (success reply or denial). The identity the
// client ends up with is Identify's, which may be an earlier-matching one.
func (p *Policy) CheckToken(token []byte) bool {
	if p == nil || token == nil {
		return false
	}
	_, ok := p.tokens[sha256.Sum256(token)]
	return ok
}

// matchCert reports whether the certificate's subject CN or one of its DNS
// SANs is one of the identity's cert_names (DNS names compare
// case-insensitively, as DNS does).
func (pr *principal) matchCert(c *x509.Certificate) bool {
	for _, n := range pr.certNames {
		if c.Subject.CommonName != "" && c.Subject.CommonName == n {
			return true
		}
		for _, d := range c.DNSNames {
			if strings.EqualFold(d, n) {
				return true
			}
		}
	}
	return false
}

// readTokens reads a tokens file: one token per line; blank lines and lines
// starting with '#' are skipped, and surrounding spaces trimmed.
func readTokens(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var toks []string
	for line := range strings.Lines(string(b)) {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		toks = append(toks, t)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%s: no tokens", path)
	}
	return toks, nil
}

// checkToken enforces the token alphabet and length, so that every token
// can be sent in every wire form (a Beanstalk tube name is the narrowest).
func checkToken(t string) error {
	if len(t) < MinTokenLen || len(t) > MaxTokenLen {
		return fmt.Errorf("%d bytes long: want %d to %d", len(t), MinTokenLen, MaxTokenLen)
	}
	if !validToken([]byte(t)) {
		return errors.New("has a byte outside A-Z a-z 0-9 - + / ; . $ _ ( )")
	}
	return nil
}

// tokenChars is the Beanstalk tube-name alphabet; a table because it is
// checked per byte.
var tokenChars = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-+/;.$_()") {
		t[c] = true
	}
	return t
}()

func validToken(b []byte) bool {
	if len(b) < MinTokenLen || len(b) > MaxTokenLen {
		return false
	}
	for _, c := range b {
		if !tokenChars[c] {
			return false
		}
	}
	return true
}
