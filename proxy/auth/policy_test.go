package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobgate/jobgate/config"
)

const (
	tokBilling = "billing-0123456789abcdef"
	tokOps     = "ops.0123456789ABCDEF+/;$_()"
	tokShared  = "shared-token-used-by-two"
)

// testConfig is a policy exercising every kind of identity and rule.
func testConfig(t *testing.T) config.Auth {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "billing.tokens")
	if err := os.WriteFile(tokens, []byte("# billing team\n\n  "+tokBilling+"  \n"+tokShared+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Auth{
		Enabled: true,
		Identities: []config.Identity{
			{Name: "ops", CertNames: []string{"ops.example.com"}, Token: tokOps},
			{Name: "billing", CertNames: []string{"billing-worker"}, TokensFile: tokens},
			{Name: "office", CIDRs: []string{"10.1.0.0/16", "2001:db8::/32"}},
			{Name: "late-token", Token: tokShared, CIDRs: []string{"10.1.2.0/24"}}, // shadowed by office and billing
			{Name: "nobody-rules", CIDRs: []string{"192.0.2.0/24"}},
		},
		Rules: []config.Rule{
			{Identity: "ops", Admin: true},
			{Identity: "billing", Produce: []string{"invoice.*", "email"}, Consume: []string{"invoice.render"}},
			{Identity: "office", Produce: []string{"report-[a-c]", `lit\*eral`}, Consume: []string{"office/*", "q?"}},
			{Identity: "*", Produce: []string{"public"}, Consume: []string{"public"}},
		},
	}
}

// testConfigStatic is testConfig without files, for fuzz setup.
func testConfigStatic() config.Auth {
	return config.Auth{
		Enabled:    true,
		Identities: []config.Identity{{Name: "ops", Token: tokOps}},
		Rules: []config.Rule{
			{Identity: "ops", Produce: []string{"invoice.*", "email", "report-[a-c]", `lit\*eral`}, Consume: []string{"office/*", "q?"}},
		},
	}
}

func mustNew(t *testing.T, cfg config.Auth) *Policy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func cert(cn string, dns ...string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}
}

func TestIdentify(t *testing.T) {
	p := mustNew(t, testConfig(t))
	addr := netip.MustParseAddr
	for _, tc := range []struct {
		name   string
		peer   Peer
		want   string
		method Method
	}{
		{"nothing", Peer{}, "", MethodNone},
		{"unknown address", Peer{Addr: addr("203.0.113.9")}, "", MethodNone},
		{"cert CN", Peer{Cert: cert("billing-worker")}, "billing", MethodCert},
		{"cert DNS SAN, case-insensitive", Peer{Cert: cert("someone", "x.example", "OPS.example.COM")}, "ops", MethodCert},
		{"cert CN is case-sensitive", Peer{Cert: cert("Billing-Worker")}, "", MethodNone},
		{"cert with no match falls to CIDR", Peer{Cert: cert("stranger"), Addr: addr("10.1.9.9")}, "office", MethodCIDR},
		{"CIDR v4", Peer{Addr: addr("10.1.200.1")}, "office", MethodCIDR},
		{"CIDR v4-mapped v6", Peer{Addr: addr("::ffff:10.1.0.1")}, "office", MethodCIDR},
		{"CIDR v6", Peer{Addr: addr("2001:db8:1::5")}, "office", MethodCIDR},
		{"CIDR edge outside", Peer{Addr: addr("10.2.0.0")}, "", MethodNone},
		{"token in config", Peer{Token: []byte(tokOps)}, "ops", MethodToken},
		{"token from file, trimmed", Peer{Token: []byte(tokBilling)}, "billing", MethodToken},
		{"unknown token", Peer{Token: []byte(tokBilling + "x")}, "", MethodNone},
		{"token prefix is not the token", Peer{Token: []byte(tokBilling[:20])}, "", MethodNone},
		// File order decides: billing (index 1) holds the shared token
		// before late-token (index 3) does.
		{"shared token: first identity", Peer{Token: []byte(tokShared)}, "billing", MethodToken},
		// office's CIDR (index 2) comes before late-token's own CIDR.
		{"first match across kinds", Peer{Addr: addr("10.1.2.3")}, "office", MethodCIDR},
		// ops (index 0) by token beats office (index 2) by address.
		{"earlier token beats later CIDR", Peer{Addr: addr("10.1.2.3"), Token: []byte(tokOps)}, "ops", MethodToken},
		// office (index 2) by address beats nothing; a cert for billing
		// (index 1) comes first.
		{"earlier cert beats later CIDR", Peer{Addr: addr("10.1.2.3"), Cert: cert("billing-worker")}, "billing", MethodCert},
		{"earlier token beats later CIDR (file)", Peer{Addr: addr("192.0.2.1"), Token: []byte(tokShared)}, "billing", MethodToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := p.Identify(tc.peer)
			if id.Name() != tc.want || id.Method() != tc.method || id.Authenticated() != (tc.want != "") {
				t.Errorf("got %q via %v, want %q via %v", id.Name(), id.Method(), tc.want, tc.method)
			}
		})
	}
	var nilPolicy *Policy
	if id := nilPolicy.Identify(Peer{Token: []byte(tokOps)}); id.Authenticated() {
		t.Error("nil policy identified someone")
	}
}

func TestCheckToken(t *testing.T) {
	p := mustNew(t, testConfig(t))
	for tok, want := range map[string]bool{tokOps: true, tokBilling: true, tokShared: true, "": false, "nope-nope-nope-nope": false} {
		if got := p.CheckToken([]byte(tok)); got != want {
			t.Errorf("CheckToken(%q) = %v", tok, got)
		}
	}
}

func TestDecide(t *testing.T) {
	p := mustNew(t, testConfig(t))
	id := func(name string) Identity {
		for _, pr := range p.principals {
			if pr.name == name {
				return Identity{pr, MethodCIDR}
			}
		}
		return Anonymous
	}
	ops, billing, office, bare := id("ops"), id("billing"), id("office"), id("nobody-rules")
	for _, tc := range []struct {
		id   Identity
		a    Action
		name string
		want Decision
	}{
		{Anonymous, Produce, "public", DenyAnonymous},
		{Anonymous, None, "", Allow},
		{ops, Admin, "", Allow},
		{ops, Produce, "invoice.x", Deny},
		{ops, Produce, "public", Allow}, // rule "*"
		{billing, Admin, "", Deny},
		{billing, Produce, "invoice.monthly", Allow}, // prefix glob
		{billing, Produce, "invoice.", Allow},
		{billing, Produce, "invoice.a/b", Deny}, // '*' stops at '/'
		{billing, Produce, "invoice", Deny},
		{billing, Produce, "email", Allow}, // exact
		{billing, Produce, "emails", Deny},
		{billing, Consume, "invoice.render", Allow},
		{billing, Consume, "invoice.monthly", Deny}, // produce does not imply consume
		{billing, Observe, "invoice.monthly", Allow},
		{billing, Observe, "invoice.render", Allow},
		{billing, Observe, "payroll", Deny},
		{billing, None, "anything", Allow},
		{office, Produce, "report-b", Allow}, // class
		{office, Produce, "report-d", Deny},
		{office, Produce, "lit*eral", Allow}, // escaped '*'
		{office, Produce, "litXeral", Deny},
		{office, Consume, "office/jobs", Allow},
		{office, Consume, "office/a/b", Deny},
		{office, Consume, "q1", Allow}, // '?'
		{office, Consume, "q12", Deny},
		{office, Consume, "public", Allow},
		{bare, Produce, "public", Allow}, // only "*"
		{bare, Consume, "private", Deny},
		{bare, Admin, "", Deny},
		{bare, Action(99), "public", Deny},
	} {
		if got := p.DecideString(tc.id, tc.a, tc.name); got != tc.want {
			t.Errorf("Decide(%v, %v, %q) = %v, want %v", tc.id, tc.a, tc.name, got, tc.want)
		}
		if got := p.Decide(tc.id, tc.a, []byte(tc.name)); got != tc.want {
			t.Errorf("Decide bytes (%v, %v, %q) = %v", tc.id, tc.a, tc.name, got)
		}
	}
}

// TestDefaultDeny: auth enabled with no rules denies everything; auth
// disabled allows everything, identities or not.
func TestDefaultDeny(t *testing.T) {
	cfg := testConfig(t)
	cfg.Rules = nil
	p := mustNew(t, cfg)
	ops := p.Identify(Peer{Token: []byte(tokOps)})
	for a := None + 1; a < numActions; a++ {
		if d := p.DecideString(ops, a, "public"); d.Allowed() {
			t.Errorf("no rules: %v allowed", a)
		}
	}
	cfg = testConfig(t)
	cfg.Enabled = false
	p = mustNew(t, cfg)
	for a := None; a < numActions; a++ {
		if d := p.DecideString(Anonymous, a, "x"); !d.Allowed() {
			t.Errorf("auth disabled: %v denied", a)
		}
	}
	if p.Enabled() {
		t.Error("Enabled")
	}
	var nilPolicy *Policy
	if !nilPolicy.DecideString(Anonymous, Admin, "").Allowed() {
		t.Error("nil policy denies")
	}
	// An identity from a replaced Policy is denied by the new one.
	oldP, newP := mustNew(t, testConfig(t)), mustNew(t, testConfig(t))
	ops = oldP.Identify(Peer{Token: []byte(tokOps)})
	if !oldP.DecideString(ops, Admin, "").Allowed() || newP.DecideString(ops, Admin, "").Allowed() {
		t.Error("stale identity")
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("# nothing\n\n"), 0o600)
	for name, mod := range map[string]func(*config.Auth){
		"missing tokens file": func(a *config.Auth) { a.Identities[1].TokensFile = filepath.Join(dir, "nope") },
		"empty tokens file":   func(a *config.Auth) { a.Identities[1].TokensFile = empty },
		"short token":         func(a *config.Auth) { a.Identities[0].Token = "short" },
		"long token":          func(a *config.Auth) { a.Identities[0].Token = strings.Repeat("a", MaxTokenLen+1) },
		"token with space":    func(a *config.Auth) { a.Identities[0].Token = "0123456789 abcdef" },
		"token with colon":    func(a *config.Auth) { a.Identities[0].Token = "0123456789:abcdef" },
		"bad CIDR":            func(a *config.Auth) { a.Identities[2].CIDRs = []string{"10.1.0.0"} },
		"bad glob":            func(a *config.Auth) { a.Rules[1].Produce = []string{"[a-"} },
		"unknown identity":    func(a *config.Auth) { a.Rules[0].Identity = "ghost" },
	} {
		cfg := testConfig(t)
		mod(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Errors are reported together.
	cfg := testConfig(t)
	cfg.Identities[0].Token = "short"
	cfg.Rules[0].Identity = "ghost"
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "token") || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("want both errors, got %v", err)
	}
}

func TestIdentityStrings(t *testing.T) {
	p := mustNew(t, testConfig(t))
	id := p.Identify(Peer{Token: []byte(tokOps)})
	if id.String() != "ops" || Anonymous.String() != "anonymous" || Anonymous.Name() != "" {
		t.Errorf("%q %q", id.String(), Anonymous.String())
	}
	if got := id.LogValue().String(); !strings.Contains(got, "ops") || !strings.Contains(got, "token") {
		t.Errorf("LogValue %s", got)
	}
	if Method(9).String() == "" || Action(99).String() == "" || Deny.String() != "denied" ||
		DenyAnonymous.String() != "denied-anonymous" || Allow.String() != "allowed" {
		t.Error("String methods")
	}
}

func TestPeerOf(t *testing.T) {
	leaf := cert("billing-worker")
	cs := &tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{cert("unverified")},
		VerifiedChains:   [][]*x509.Certificate{{leaf}},
	}
	p := PeerOf(&net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 9}, cs)
	if p.Addr != netip.MustParseAddr("10.1.2.3") || p.Cert != leaf {
		t.Errorf("%+v", p)
	}
	// Sent but not verified (client_auth request, no CA match): no cert.
	p = PeerOf(&net.UnixAddr{Name: "@x"}, &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}})
	if p.Addr.IsValid() || p.Cert != nil {
		t.Errorf("%+v", p)
	}
	if p := PeerOf(nil, nil); p.Addr.IsValid() || p.Cert != nil {
		t.Errorf("%+v", p)
	}
	wrapped := stringAddr("192.0.2.7:4730")
	if p := PeerOf(wrapped, nil); p.Addr != netip.MustParseAddr("192.0.2.7") {
		t.Errorf("%+v", p)
	}
}

type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }
