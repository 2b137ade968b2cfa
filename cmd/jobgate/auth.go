package main

import (
	"fmt"

	"github.com/jobgate/jobgate/config"
	"github.com/jobgate/jobgate/proxy/auth"
)

// authPolicy compiles the auth section for a server, or returns nil when
// it configures nothing, so that servers without auth pay nothing for it.
// Each server gets its own Policy (they are immutable, so sharing would
// work too; building twice only rereads the token files).
func authPolicy(cfg *config.Config) (*auth.Policy, error) {
	if !cfg.Auth.Enabled && len(cfg.Auth.Identities) == 0 {
		return nil, nil
	}
	p, err := auth.New(cfg.Auth)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return p, nil
}
