package auth

import (
	"bytes"
	"path"
	"testing"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
)

// FuzzParseToken runs every token parser on arbitrary input. The invariants:
// a returned token is a valid token and a suffix of the input right after
// the form's prefix; claiming the input means it starts with the prefix;
// and a claimed Beanstalk tube with a token is a tube name the codec
// accepts. The committed corpus is in testdata/fuzz/FuzzParseToken.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{
		"jobgate-auth." + tokOps, "auth=" + tokBilling, "jobgate-auth.", "auth=", "exceptions",
		"default", "jobgate-auth.short", "auth=\x00\xff", "jobgate-auth." + tokShared + "\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		for _, form := range []struct {
			prefix string
			parse  func([]byte) ([]byte, bool)
		}{
			{TokenPrefix, ParseBeanstalkToken},
			{GearmanOptionPrefix, ParseGearmanOption},
			{TokenPrefix, ParseGearmanClientID},
		} {
			tok, claimed := form.parse(in)
			if claimed != bytes.HasPrefix(in, []byte(form.prefix)) {
				t.Fatalf("%q: claimed %v", in, claimed)
			}
			if tok == nil {
				continue
			}
			if !claimed || !validToken(tok) || !bytes.Equal(tok, in[len(form.prefix):]) {
				t.Fatalf("%q: token %q", in, tok)
			}
			if form.prefix == TokenPrefix && !bscodec.ValidName(in) {
				t.Fatalf("%q: not a tube name", in)
			}
		}
		if !bytes.Equal(in, orig) {
			t.Fatal("input modified")
		}
	})
}

// FuzzDecide checks Decide against a naive oracle, path.Match over every
// glob of the rule, for arbitrary names and actions: the compiled fast
// paths (exact, prefix) must not change the answer. Anonymous clients are
// never allowed anything that needs a right.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{"invoice.x", "invoice.a/b", "email", "report-b", "lit*eral", "office/x", "q1", "", "\x00", "invoice.\xff"} {
		f.Add([]byte(s), uint8(Produce))
		f.Add([]byte(s), uint8(Consume))
	}
	cfg := testConfigStatic()
	p, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	id := p.Identify(Peer{Token: []byte(tokOps)})
	oracle := func(globs []string, name []byte) bool {
		for _, g := range globs {
			if ok, _ := path.Match(g, string(name)); ok {
				return true
			}
		}
		return false
	}
	r := cfg.Rules[0]
	f.Fuzz(func(t *testing.T, name []byte, a uint8) {
		act := Action(a % uint8(numActions+1))
		var want bool
		switch act {
		case None:
			want = true
		case Produce:
			want = oracle(r.Produce, name)
		case Consume:
			want = oracle(r.Consume, name)
		case Observe:
			want = oracle(r.Produce, name) || oracle(r.Consume, name)
		case Admin:
			want = r.Admin
		}
		if got := p.Decide(id, act, name).Allowed(); got != want {
			t.Fatalf("Decide(%v, %q) = %v, path.Match says %v", act, name, got, want)
		}
		if act != None && p.Decide(Anonymous, act, name).Allowed() {
			t.Fatal("anonymous allowed")
		}
	})
}
