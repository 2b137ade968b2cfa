// Package authtest holds the auth configuration the Gearman and Beanstalk
// auth tests share, so that both protocols are held to the same policy.
package authtest

import (
	"testing"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/proxy/auth"
)

// Tokens of the test identities (16+ bytes of the tube-name alphabet, so
// that Beanstalk clients can present them as tube names).
const (
	TokWorker = "worker-token-0123456789"
	TokAdmin  = "admin-token-0123456789ab"
)

// Config is the auth section of the tests: token identities first (so a
// token wins over the loopback address), a certificate identity
// (worker.example), an address range loopback is not in, and loopback
// itself ("local", a producer of "jobs" and "pub.*").
func Config() config.Auth {
	return config.Auth{
		Enabled: true,
		Identities: []config.Identity{
			{Name: "worker", Token: TokWorker},
			{Name: "admin", Token: TokAdmin},
			{Name: "certworker", CertNames: []string{"worker.example"}},
			{Name: "corp", CIDRs: []string{"10.0.0.0/8"}},
			{Name: "local", CIDRs: []string{"127.0.0.1/32"}},
		},
		Rules: []config.Rule{
			{Identity: "local", Produce: []string{"jobs", "pub.*"}},
			{Identity: "worker", Consume: []string{"jobs"}},
			{Identity: "certworker", Consume: []string{"jobs"}},
			{Identity: "admin", Admin: true, Produce: []string{"*"}, Consume: []string{"*"}},
			{Identity: "corp", Admin: true, Produce: []string{"*"}, Consume: []string{"*"}},
		},
	}
}

// Policy compiles c, failing the test when it does not.
func Policy(t testing.TB, c config.Auth) *auth.Policy {
	t.Helper()
	p, err := auth.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
